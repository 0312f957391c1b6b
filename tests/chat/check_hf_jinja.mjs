// Render every (template, case) of renders.json again with @huggingface/jinja,
// a second implementation of the Jinja that chat templates are written in,
// and say for each whether it agrees with the golden (Jinja2 in Python, as
// transformers renders): the same text, the same raise_exception message,
// or a refusal on both sides. Where they differ, the first differing byte
// and a little of each side around it.
//
//   cd tests/chat && npm ci && node check_hf_jinja.mjs [renders.json]
//
// The variables are generate.py's: messages, tools (or null), documents
// (null), add_generation_prompt, the template's special tokens, the case's
// kwargs, raise_exception and strftime_now at the golden's "now" in UTC.
// The continued prompt of a continue_final_message case is computed the
// same way as there (transformers' marker, then the cut) and compared too.
// The exit status is 0 whatever the agreement: differences are reported,
// and README.md says which are known and why.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Environment, Template } from "@huggingface/jinja";

const here = dirname(fileURLToPath(import.meta.url));
const rendersPath = process.argv[2] ?? join(here, "renders.json");
const goldens = JSON.parse(readFileSync(rendersPath, "utf8"));
const templates = JSON.parse(readFileSync(join(here, "templates.json"), "utf8"));
const cases = JSON.parse(readFileSync(join(here, "conversations.json"), "utf8"));
const CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG ";

class Raised extends Error {}

// Template.render() declares the library's own raise_exception and
// strftime_now before the caller's variables, and a second declaration is
// refused; these two, as transformers' globals replace Jinja2's, replace the
// library's instead.
const OWN_GLOBALS = new Set(["raise_exception", "strftime_now"]);
const declare = Environment.prototype.set;
Environment.prototype.set = function (name, value) {
    if (OWN_GLOBALS.has(name) && this.variables.has(name)) {
        const scratch = new Environment();
        declare.call(scratch, name, value);
        this.setVariable(name, scratch.variables.get(name));
        return this.variables.get(name);
    }
    return declare.call(this, name, value);
};

// Python's strftime in the C locale, for the codes chat templates use, at
// the golden's instant in UTC.
const now = new Date(goldens.now * 1000);
const MONTHS = ["January", "February", "March", "April", "May", "June", "July",
    "August", "September", "October", "November", "December"];
const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
function strftimeNow(format) {
    const d = now;
    const pad = (n, w = 2) => String(n).padStart(w, "0");
    const yday = Math.floor((d - Date.UTC(d.getUTCFullYear(), 0, 1)) / 86400000) + 1;
    const codes = {
        Y: () => String(d.getUTCFullYear()), y: () => pad(d.getUTCFullYear() % 100),
        m: () => pad(d.getUTCMonth() + 1), d: () => pad(d.getUTCDate()),
        b: () => MONTHS[d.getUTCMonth()].slice(0, 3), B: () => MONTHS[d.getUTCMonth()],
        a: () => DAYS[d.getUTCDay()].slice(0, 3), A: () => DAYS[d.getUTCDay()],
        H: () => pad(d.getUTCHours()), I: () => pad(((d.getUTCHours() + 11) % 12) + 1),
        p: () => (d.getUTCHours() < 12 ? "AM" : "PM"), M: () => pad(d.getUTCMinutes()),
        S: () => pad(d.getUTCSeconds()), j: () => pad(yday, 3), "%": () => "%",
    };
    return format.replace(/%(.)/g, (all, c) => (codes[c] ? codes[c]() : all));
}

function render(template, entry, c, messages) {
    const vars = { ...entry.special_tokens, ...(c.kwargs ?? {}) };
    return template.render({
        ...vars,
        messages,
        tools: c.tools ?? null,
        documents: null,
        add_generation_prompt: c.add_generation_prompt,
        raise_exception: (message) => { throw new Raised(message); },
        strftime_now: strftimeNow,
    });
}

function outcome(fn) {
    try {
        return { text: fn() };
    } catch (e) {
        if (e instanceof Raised) return { raises: e.message };
        return { error: `${e.name}: ${e.message}` };
    }
}

// transformers' continue_final_message, as generate.py computes it.
function continued(template, entry, c) {
    const messages = structuredClone(c.messages);
    const last = messages[messages.length - 1];
    let final = last.content;
    if (Array.isArray(final)) {
        const part = [...final].reverse().find((p) => "text" in p);
        if (!part) throw new Error("continue_final_message: no text to continue");
        final = part.text;
        part.text += CONTINUE_TAG;
    } else {
        last.content = final + CONTINUE_TAG;
    }
    const text = render(template, entry, c, messages);
    if (!text.includes(final.trim()) || !text.includes(CONTINUE_TAG.trim()))
        throw new Error("continue_final_message: the final message does not appear");
    const at = text.lastIndexOf(CONTINUE_TAG.trim());
    if (text.slice(at, at + CONTINUE_TAG.length) === CONTINUE_TAG) return text.slice(0, at);
    return text.slice(0, at).trimEnd();
}

const show = (s) => JSON.stringify(s);

// "" when a and b agree, else a one-line reason.
function compare(golden, got) {
    if ("text" in golden && "text" in got) {
        if (golden.text === got.text) return "";
        const a = golden.text, b = got.text;
        let i = 0;
        while (i < a.length && i < b.length && a[i] === b[i]) i++;
        const from = Math.max(0, i - 20);
        return `text differs at ${i} (of ${a.length} / ${b.length}): ` +
            `jinja2 ${show(a.slice(from, i + 30))} vs ${show(b.slice(from, i + 30))}`;
    }
    if ("raises" in golden && "raises" in got) {
        return golden.raises === got.raises ? "" :
            `raise_exception differs: ${show(golden.raises)} vs ${show(got.raises)}`;
    }
    if ("error" in golden && "error" in got) return "";
    const what = (o) => ("text" in o ? "a text" : "raises" in o ? `raises ${show(o.raises)}` : `error (${o.error})`);
    return `jinja2 gives ${what(golden)}, @huggingface/jinja ${what(got)}`;
}

let agree = 0, differ = 0;
const differing = [];
for (const t of templates) {
    const entry = goldens.templates[t.name];
    if (!entry) {
        console.log(`${t.name}: not in ${rendersPath}`);
        differ++;
        continue;
    }
    let template;
    try {
        template = new Template(readFileSync(join(here, t.file), "utf8"));
    } catch (e) {
        console.log(`${t.name}: does not parse: ${e.message}`);
        differ += cases.length;
        differing.push(`${t.name} (all cases: the template does not parse)`);
        continue;
    }
    for (const c of cases) {
        const golden = entry.cases[c.name];
        const got = outcome(() => render(template, entry, c, c.messages));
        const reasons = [];
        const r = compare(golden, got);
        if (r) reasons.push(r);
        if (golden.continued) {
            const rc = compare(golden.continued, outcome(() => continued(template, entry, c)));
            if (rc) reasons.push(`continued: ${rc}`);
        }
        if (reasons.length === 0) {
            agree++;
            console.log(`agree   ${t.name} / ${c.name}`);
        } else {
            differ++;
            differing.push(`${t.name} / ${c.name}`);
            console.log(`differ  ${t.name} / ${c.name}: ${reasons.join("; ")}`);
        }
    }
}
console.log(`\n@huggingface/jinja against ${rendersPath}: ${agree} agree, ${differ} differ`);
for (const d of differing) console.log(`  differs: ${d}`);

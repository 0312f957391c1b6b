#!/usr/bin/python3
"""Render every chat template of templates.json over every conversation of
conversations.json as transformers' apply_chat_template renders them, into
renders.json: the golden prompts server/chat/'s interpreter is held to.

    /usr/bin/python3 tests/chat/generate.py        (from the repository root)

The environment is transformers' own (utils/chat_template_utils.py,
_compile_jinja_template and render_jinja_template), rebuilt here on Jinja2
alone, since transformers is not a dependency of the tests:

  - jinja2.sandbox.ImmutableSandboxedEnvironment with trim_blocks and
    lstrip_blocks, the loopcontrols extension and an extension for the
    {% generation %} tag, which renders its body unchanged (transformers
    records where the body falls, to mask assistant tokens; the text is
    the same);
  - the tojson filter replaced by json.dumps(x, ensure_ascii=False,
    indent=indent, separators=separators, sort_keys=sort_keys), so that
    no HTML characters are escaped and keys keep their order;
  - the globals raise_exception(message), which raises
    jinja2.exceptions.TemplateError(message), and strftime_now(format),
    which is datetime.now().strftime(format) with the clock stopped at NOW
    and TZ=UTC, so that the renders do not change from day to day;
  - the variables of a render: messages, tools (the case's list, else
    None: transformers passes tools=None, so that `tools is defined` holds
    and `tools is none` too), documents=None, add_generation_prompt, then
    the tokenizer's special_tokens_map (bos_token, eos_token, unk_token,
    sep_token, pad_token, cls_token, mask_token and
    additional_special_tokens, each only when set) overlaid by the case's
    kwargs.

A case whose conversation ends in a message to continue
(continue_final_message) is rendered twice: once as it is, with the case's
add_generation_prompt (false: transformers refuses both at once), and once
as apply_chat_template(continue_final_message=True) computes the prompt: a
marker appended to the final message's content (its last text part when
the content is a list), the conversation rendered, and the text cut where
the marker starts (and the whitespace before it removed too when the
template stripped the marker's trailing space).

Outcomes: {"text": ...} for a render; {"raises": message} when the template
called raise_exception(message); {"error": "Type: message"} when Jinja or
Python refused an operation (an attribute of an undefined value, a string
added to a dictionary), which the interpreter reports as a runtime error.
"""
import copy
import datetime
import json
import os
import sys
import time

os.environ["TZ"] = "UTC"
time.tzset()

import jinja2  # noqa: E402
import jinja2.ext  # noqa: E402
import jinja2.nodes  # noqa: E402
from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

# The instant strftime_now() formats: 2026-03-05 09:07:02 UTC. A day and an
# hour below 10, so that zero padding shows.
NOW = int(datetime.datetime(2026, 3, 5, 9, 7, 2, tzinfo=datetime.timezone.utc).timestamp())

# transformers' marker for continue_final_message (render_jinja_template).
CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "


class GenerationBlock(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: its body, unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        call = self.call_method("_body", [], [])
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def strftime_now(fmt):
    return datetime.datetime.fromtimestamp(NOW).strftime(fmt)


def environment():
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(template, special_tokens, case, messages):
    variables = dict(special_tokens)
    variables.update(case.get("kwargs", {}))
    return template.render(
        messages=messages,
        tools=case.get("tools"),
        documents=None,
        add_generation_prompt=case["add_generation_prompt"],
        **variables,
    )


def outcome(fn):
    try:
        return {"text": fn()}
    except jinja2.exceptions.TemplateError as e:
        if type(e) is jinja2.exceptions.TemplateError:
            return {"raises": e.message}
        return {"error": "%s: %s" % (type(e).__name__, e)}
    except Exception as e:  # a type error in the template's arithmetic
        return {"error": "%s: %s" % (type(e).__name__, e)}


def continued(template, special_tokens, case):
    """The prompt apply_chat_template(continue_final_message=True) returns."""
    if case["add_generation_prompt"]:
        raise ValueError("continue_final_message and add_generation_prompt are not compatible")
    messages = copy.deepcopy(case["messages"])
    final = messages[-1]["content"]
    if isinstance(final, list):
        for part in reversed(final):
            if "text" in part:
                final = part["text"]
                part["text"] = part["text"] + CONTINUE_TAG
                break
        else:
            raise ValueError("continue_final_message is set but we could not find any text to continue in the final message!")
    else:
        messages[-1]["content"] = final + CONTINUE_TAG
    text = render(template, special_tokens, case, messages)
    if final.strip() not in text or CONTINUE_TAG.strip() not in text:
        raise ValueError(
            "continue_final_message is set but the final message does not appear in the chat after applying the chat template!"
        )
    at = text.rindex(CONTINUE_TAG.strip())
    if text[at : at + len(CONTINUE_TAG)] == CONTINUE_TAG:
        return text[:at]
    return text[:at].rstrip()


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "renders.json")
    with open(os.path.join(HERE, "templates.json"), encoding="utf-8") as f:
        templates = json.load(f)
    with open(os.path.join(HERE, "conversations.json"), encoding="utf-8") as f:
        cases = json.load(f)
    env = environment()
    result = {
        "now": NOW,
        "tz": "UTC",
        "now_utc": datetime.datetime.fromtimestamp(NOW, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        "jinja2": jinja2.__version__,
        "templates": {},
    }
    for t in templates:
        with open(os.path.join(HERE, t["file"]), encoding="utf-8", newline="") as f:
            source = f.read()
        template = env.from_string(source)
        tokens = t["special_tokens"]
        entry = {
            "file": t["file"],
            "bos_token": tokens.get("bos_token"),
            "eos_token": tokens.get("eos_token"),
            "special_tokens": tokens,
            "cases": {},
        }
        for case in cases:
            got = outcome(lambda: render(template, tokens, case, case["messages"]))
            if case.get("continue_final_message"):
                got["continued"] = outcome(lambda: continued(template, tokens, case))
            entry["cases"][case["name"]] = got
        result["templates"][t["name"]] = entry
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()

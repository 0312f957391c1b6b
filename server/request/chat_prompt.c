/*
 * chat_prompt.c - a conversation into a model's prompt (chat_prompt.h).
 */
#include "chat_prompt.h"
#include "buf.h"
#include "jsonin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What one render may take: its output, the values it builds, its
 * steps. A prompt is bounded by the model's positions long before the
 * first two; real templates take a few hundred steps a message. */
static const struct jinja_limits render_limits = {
    .max_output = CHAT_RENDER_OUTPUT,
    .max_steps = (size_t)1 << 20,
    .max_depth = 64,
    .max_bytes = CHAT_RENDER_VALUES,
};

static const char *const roles[] = {"system", "developer", "user", "assistant",
                                    "tool"};
/* The members a message may have, as OpenAI's clients send them. */
static const char *const message_keys[] = {
    "role",         "content",           "name",    "tool_calls",
    "tool_call_id", "reasoning_content", "refusal", "function_call"};

static bool one_of(const char *s, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s, names[i]))
            return true;
    return false;
}

/* A text the template is given: UTF-8, as the tokenizer reads it. */
static bool check_text(const char *s, const struct jpath *at,
                       struct problem *pb)
{
    const size_t valid = buf_utf8_prefix(s);
    return !s[valid] ||
           problem_set(pb, 422, at->pointer,
                       "%s is not valid UTF-8 at byte %zu", at->name, valid);
}

/* content: a string, text parts, or (an assistant's with tool calls)
 * null or absent. */
static bool check_content(const cJSON *msg, const struct jpath *at,
                          bool may_be_empty, struct problem *pb)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(msg, "content");
    struct jpath here;
    jpath_key(&here, at, "content");
    if (!c || cJSON_IsNull(c)) {
        if (may_be_empty)
            return true;
        return problem_set(pb, 422, here.pointer,
                           "%s is missing; a message has content, a string "
                           "or an array of text parts",
                           here.name);
    }
    if (cJSON_IsString(c))
        return check_text(c->valuestring, &here, pb);
    if (!cJSON_IsArray(c))
        return problem_set(pb, 422, here.pointer,
                           "%s is %s; expected a string or an array of text "
                           "parts",
                           here.name, jsonin_kind(c));
    size_t i = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, c)
    {
        struct jpath p;
        jpath_index(&p, &here, i++);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsObject(part) || !cJSON_IsString(type))
            return problem_set(pb, 422, p.pointer,
                               "%s is %s; expected a part {\"type\": \"text\", "
                               "\"text\": ...}",
                               p.name, jsonin_kind(part));
        if (strcmp(type->valuestring, "text"))
            return problem_set(pb, 422, p.pointer,
                               "%s is a part of type \"%.40s\"; the models "
                               "attnd serves read text parts only",
                               p.name, type->valuestring);
        struct jpath t;
        jpath_key(&t, &p, "text");
        if (!cJSON_IsString(text))
            return problem_set(pb, 422, t.pointer,
                               "%s is %s; expected a string", t.name,
                               text ? jsonin_kind(text) : "missing");
        if (!check_text(text->valuestring, &t, pb))
            return false;
    }
    return true;
}

/* An assistant's tool calls, [{type: "function", function: {name,
 * arguments}}]; the arguments, a JSON string, become what they hold. */
static bool read_tool_calls(cJSON *msg, const struct jpath *at,
                            struct problem *pb)
{
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
    struct jpath here;
    jpath_key(&here, at, "tool_calls");
    if (!calls || cJSON_IsNull(calls))
        return true;
    if (!cJSON_IsArray(calls))
        return problem_set(pb, 422, here.pointer,
                           "%s is %s; expected an array of tool calls",
                           here.name, jsonin_kind(calls));
    size_t i = 0;
    cJSON *call;
    cJSON_ArrayForEach(call, calls)
    {
        struct jpath p, f;
        jpath_index(&p, &here, i++);
        jpath_key(&f, &p, "function");
        cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsObject(call) || !cJSON_IsObject(fn) ||
            !cJSON_IsString(name))
            return problem_set(pb, 422, f.pointer,
                               "%s is not {\"name\": a string, \"arguments\": "
                               "a JSON string}",
                               f.name);
        cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (!cJSON_IsString(args))
            continue;
        cJSON *held = cJSON_Parse(args->valuestring);
        if (!cJSON_IsObject(held)) {
            cJSON_Delete(held);
            struct jpath a;
            jpath_key(&a, &f, "arguments");
            return problem_set(pb, 422, a.pointer,
                               "%s is not a JSON object in a string", a.name);
        }
        cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", held);
    }
    return true;
}

static bool read_message(cJSON *msg, size_t index, struct problem *pb)
{
    struct jpath root, at, role_at;
    jpath_root(&root, "messages");
    jpath_index(&at, &root, index);
    jpath_key(&role_at, &at, "role");
    if (!cJSON_IsObject(msg))
        return problem_set(pb, 422, at.pointer,
                           "%s is %s; expected a message {\"role\", "
                           "\"content\"}",
                           at.name, jsonin_kind(msg));
    const cJSON *key;
    cJSON_ArrayForEach(
        key, msg) if (!one_of(key->string, message_keys,
                              sizeof message_keys / sizeof *message_keys))
    {
        struct jpath k;
        jpath_key(&k, &at, key->string);
        return problem_set(pb, 422, k.pointer,
                           "%s is not a member of a message (role, content, "
                           "name, tool_calls, tool_call_id, "
                           "reasoning_content)",
                           k.name);
    }
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
    if (!cJSON_IsString(role) ||
        !one_of(role->valuestring, roles, sizeof roles / sizeof *roles)) {
        char shown[80];
        jsonin_show(role, shown, sizeof shown);
        return problem_set(pb, 422, role_at.pointer,
                           "%s is %s; expected \"system\", \"developer\", "
                           "\"user\", \"assistant\" or \"tool\"",
                           role_at.name, role ? shown : "missing");
    }
    const bool assistant = !strcmp(role->valuestring, "assistant");
    if (!assistant && cJSON_GetObjectItemCaseSensitive(msg, "tool_calls")) {
        struct jpath k;
        jpath_key(&k, &at, "tool_calls");
        return problem_set(pb, 422, k.pointer,
                           "%s is an assistant's; this message is the %s's",
                           k.name, role->valuestring);
    }
    static const char *const strings[] = {"name", "tool_call_id",
                                          "reasoning_content"};
    for (size_t i = 0; i < 3; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(msg, strings[i]);
        if (v && !cJSON_IsString(v) && !cJSON_IsNull(v)) {
            struct jpath k;
            jpath_key(&k, &at, strings[i]);
            return problem_set(pb, 422, k.pointer,
                               "%s is %s; expected a string", k.name,
                               jsonin_kind(v));
        }
    }
    return check_content(msg, &at, assistant, pb) &&
           read_tool_calls(msg, &at, pb);
}

static bool read_tools(const cJSON *tools, struct problem *pb)
{
    if (!cJSON_IsArray(tools))
        return problem_set(pb, 422, "/tools",
                           "tools is %s; expected an array of "
                           "{\"type\": \"function\", \"function\": {...}}",
                           jsonin_kind(tools));
    const int n = cJSON_GetArraySize(tools);
    if (n > CHAT_MAX_TOOLS)
        return problem_set(pb, 422, "/tools", "tools has %d tools; at most %d",
                           n, CHAT_MAX_TOOLS);
    struct jpath root;
    jpath_root(&root, "tools");
    size_t i = 0;
    const cJSON *tool;
    cJSON_ArrayForEach(tool, tools)
    {
        struct jpath at;
        jpath_index(&at, &root, i++);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(tool, "type");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") ||
            !cJSON_IsObject(fn) || !cJSON_IsString(name))
            return problem_set(pb, 422, at.pointer,
                               "%s is not {\"type\": \"function\", "
                               "\"function\": {\"name\": ..., ...}}",
                               at.name);
    }
    return true;
}

bool chat_fields_read(cJSON *root, struct chat_fields *out, struct problem *pb)
{
    memset(out, 0, sizeof *out);
    cJSON *messages = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!cJSON_IsArray(messages))
        return problem_set(pb, 422, "/messages",
                           "messages is %s; expected an array of messages "
                           "{\"role\", \"content\"}",
                           messages ? jsonin_kind(messages) : "missing");
    const int n = cJSON_GetArraySize(messages);
    if (n == 0 || n > CHAT_MAX_MESSAGES)
        return problem_set(pb, 422, "/messages",
                           "messages has %d messages; a chat has 1 to %d", n,
                           CHAT_MAX_MESSAGES);
    out->messages = messages;
    size_t i = 0;
    cJSON *msg;
    cJSON_ArrayForEach(msg,
                       messages) if (!read_message(msg, i++, pb)) return false;
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (tools && !cJSON_IsNull(tools)) {
        if (!read_tools(tools, pb))
            return false;
        out->tools = cJSON_GetArraySize(tools) ? tools : NULL;
    }
    const cJSON *kw =
        cJSON_GetObjectItemCaseSensitive(root, "chat_template_kwargs");
    if (kw && !cJSON_IsNull(kw)) {
        if (!cJSON_IsObject(kw))
            return problem_set(pb, 422, "/chat_template_kwargs",
                               "chat_template_kwargs is %s; expected an object "
                               "of the template's variables",
                               jsonin_kind(kw));
        if (cJSON_GetArraySize(kw) > CHAT_MAX_KWARGS)
            return problem_set(pb, 422, "/chat_template_kwargs",
                               "chat_template_kwargs has %d variables; at "
                               "most %d",
                               cJSON_GetArraySize(kw), CHAT_MAX_KWARGS);
        static const char *const fixed[] = {"messages", "tools", "documents",
                                            "add_generation_prompt"};
        const cJSON *k;
        cJSON_ArrayForEach(k, kw) if (one_of(k->string, fixed, 4))
        {
            struct jpath root_at, at;
            jpath_root(&root_at, "chat_template_kwargs");
            jpath_key(&at, &root_at, k->string);
            return problem_set(pb, 422, at.pointer,
                               "%s is the request's own field; give it there",
                               at.name);
        }
        out->kwargs = kw;
    }
    if (!jsonin_flag(root, "add_generation_prompt", true,
                     &out->add_generation_prompt, pb) ||
        !jsonin_flag(root, "continue_final_message", false,
                     &out->continue_final_message, pb))
        return false;
    if (out->continue_final_message) {
        // transformers refuses the two together
        const cJSON *agp =
            cJSON_GetObjectItemCaseSensitive(root, "add_generation_prompt");
        if (cJSON_IsTrue(agp))
            return problem_set(pb, 422, "/continue_final_message",
                               "continue_final_message continues the last "
                               "message; add_generation_prompt starts a new "
                               "one: set it false");
        out->add_generation_prompt = false;
    }
    return true;
}

/* ------------------------------------------------------------- render */

/* The text of content parts joined by newlines, for a template that
 * reads content as a string (as vLLM hands them over). */
static cJSON *joined_parts(const cJSON *parts)
{
    size_t len = 1;
    const cJSON *p;
    cJSON_ArrayForEach(p, parts) len +=
        strlen(cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring) + 1;
    char *text = malloc(len), *at = text;
    if (!text)
        return NULL;
    cJSON_ArrayForEach(p, parts)
    {
        const char *t =
            cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
        if (at != text)
            *at++ = '\n';
        memcpy(at, t, strlen(t));
        at += strlen(t);
    }
    *at = 0;
    cJSON *s = cJSON_CreateString(text);
    free(text);
    return s;
}

/* The template's variables: messages (text parts joined unless the
 * template reads parts), tools, documents, add_generation_prompt, the
 * special tokens, then chat_template_kwargs, as transformers passes
 * them. */
static cJSON *context_of(const struct model *m, const struct chat_template *t,
                         const struct chat_fields *f)
{
    cJSON *ctx = cJSON_CreateObject();
    cJSON *messages = cJSON_Duplicate(f->messages, true);
    bool ok =
        ctx && messages && cJSON_AddItemToObject(ctx, "messages", messages);
    if (!ok)
        cJSON_Delete(messages);
    // content as the template reads it: no content (an assistant's with
    // tool calls) is none to say, "" or [] as vLLM hands it over, since
    // most templates refuse or print a null; parts joined for a template
    // that reads a string
    cJSON *msg;
    if (ok)
        cJSON_ArrayForEach(msg, messages)
        {
            cJSON *c = cJSON_GetObjectItemCaseSensitive(msg, "content");
            cJSON *now = NULL;
            if (!c || cJSON_IsNull(c))
                now = t->content_parts ? cJSON_CreateArray()
                                       : cJSON_CreateString("");
            else if (cJSON_IsArray(c) && !t->content_parts)
                now = joined_parts(c);
            else
                continue;
            cJSON_DeleteItemFromObjectCaseSensitive(msg, "content");
            ok = ok && now && cJSON_AddItemToObject(msg, "content", now);
        }
    ok = ok && cJSON_AddItemToObject(ctx, "tools",
                                     f->tools ? cJSON_Duplicate(f->tools, true)
                                              : cJSON_CreateNull());
    ok = ok && cJSON_AddNullToObject(ctx, "documents");
    ok = ok && cJSON_AddBoolToObject(ctx, "add_generation_prompt",
                                     f->add_generation_prompt);
    // the special tokens, but those chat_template_kwargs sets again
    const cJSON *k;
    if (ok && m->chat.specials)
        cJSON_ArrayForEach(
            k, m->chat.specials) if (ok &&
                                     !cJSON_GetObjectItemCaseSensitive(
                                         f->kwargs, k->string)) ok =
            cJSON_AddItemToObject(ctx, k->string, cJSON_Duplicate(k, true));
    if (ok && f->kwargs)
        cJSON_ArrayForEach(k, f->kwargs) ok =
            ok &&
            cJSON_AddItemToObject(ctx, k->string, cJSON_Duplicate(k, true));
    if (!ok) {
        cJSON_Delete(ctx);
        return NULL;
    }
    return ctx;
}

/* transformers' marker of the end of a message to continue: appended to
 * its text before the render, and where the render is cut. */
static const char continue_tag[] = "CONTINUE_FINAL_MESSAGE_TAG ";

/* The last message's text in ctx (a string, or its last text part) with
 * the marker appended, as transformers marks it. */
static bool mark_final(cJSON *ctx, struct problem *pb)
{
    cJSON *messages = cJSON_GetObjectItemCaseSensitive(ctx, "messages");
    cJSON *last =
        cJSON_GetArrayItem(messages, cJSON_GetArraySize(messages) - 1);
    cJSON *holder = last;
    cJSON *c = cJSON_GetObjectItemCaseSensitive(last, "content");
    if (cJSON_IsArray(c)) {
        holder = NULL;
        for (int i = cJSON_GetArraySize(c) - 1; i >= 0 && !holder; i--)
            if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetArrayItem(c, i), "text")))
                holder = cJSON_GetArrayItem(c, i);
    }
    const char *key = holder == last ? "content" : "text";
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(holder, key);
    if (!cJSON_IsString(text))
        return problem_set(pb, 422, "/continue_final_message",
                           "continue_final_message: the last message has no "
                           "text to continue");
    const size_t len = strlen(text->valuestring);
    char *marked = malloc(len + sizeof continue_tag);
    if (!marked)
        return problem_set(pb, 503, "", "out of memory");
    memcpy(marked, text->valuestring, len);
    memcpy(marked + len, continue_tag, sizeof continue_tag);
    cJSON *item = cJSON_CreateString(marked);
    free(marked);
    return (item &&
            cJSON_ReplaceItemInObjectCaseSensitive(holder, key, item)) ||
           problem_set(pb, 503, "", "out of memory");
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
           c == '\f';
}

/* The render cut where the marker starts, so that the model goes on with
 * the last message; when the template trimmed the marker's space, the
 * space before the cut goes too. */
static bool cut_at_mark(char *text, size_t *len, struct problem *pb)
{
    const size_t tag = sizeof continue_tag - 1, bare = tag - 1;
    const char *at = NULL;
    for (size_t p = 0; p + bare <= *len; p++)
        if (!memcmp(text + p, continue_tag, bare))
            at = text + p;
    if (!at)
        return problem_set(pb, 400, "/continue_final_message",
                           "continue_final_message: the last message does not "
                           "appear in the chat the template renders");
    size_t cut = (size_t)(at - text);
    if (!(cut + tag <= *len && !memcmp(at, continue_tag, tag)))
        while (cut && is_space(text[cut - 1]))
            cut--;
    *len = cut;
    text[cut] = 0;
    return true;
}

bool chat_prompt_render(const struct model *m, const struct chat_fields *f,
                        time_t now, char **text, size_t *len,
                        struct problem *pb)
{
    *text = NULL;
    const struct chat_template *t = chat_template_pick(&m->chat, f->tools);
    if (!t)
        return problem_set(pb, 400, "/messages",
                           "the model \"%s\" has no chat template "
                           "(tokenizer_config.json's chat_template, or "
                           "chat_template.jinja): send a prompt instead "
                           "(/v1/completions)",
                           m->name);
    if (!t->compiled)
        return problem_set(pb, 400, "/messages",
                           "the model \"%s\"'s chat template \"%s\" cannot be "
                           "rendered: %s",
                           m->name, t->name, t->error);
    cJSON *ctx = context_of(m, t, f);
    if (!ctx)
        return problem_set(pb, 503, "", "out of memory");
    if (f->continue_final_message && !mark_final(ctx, pb)) {
        cJSON_Delete(ctx);
        return false;
    }
    struct jinja_error err = {0};
    const jinja_status st =
        jinja_render(t->compiled, ctx, &render_limits, now, text, len, &err);
    cJSON_Delete(ctx);
    switch (st) {
    case JINJA_OK: break;
    case JINJA_E_RAISED:
        return problem_set(pb, 400, "/messages",
                           "the chat template refused the conversation: %s",
                           err.message);
    case JINJA_E_NOMEM:
        return problem_set(pb, 503, "", "out of memory rendering the chat");
    case JINJA_E_LIMIT:
        return problem_set(pb, 400, "/messages",
                           "rendering the chat template went past a limit: "
                           "%s",
                           err.message);
    default:
        return problem_set(pb, 400, "/messages",
                           "the chat template \"%s\" failed on this "
                           "conversation: %s",
                           t->name, err.message);
    }
    if (f->continue_final_message && !cut_at_mark(*text, len, pb)) {
        free(*text);
        *text = NULL;
        return false;
    }
    return true;
}

/*
 * test_jinja.c - the chat template interpreter (server/chat/jinja.h): its
 * renders, its refusals and its limits.
 *
 * Every expected render in the tables below is jinja2's own output
 * (jinja2 3.1.2, Debian's, run by /usr/bin/python3), for the template
 * and variables beside it, in the environment transformers renders chat
 * templates in: ImmutableSandboxedEnvironment(trim_blocks=True,
 * lstrip_blocks=True, extensions=[loopcontrols]) with transformers'
 * tojson (json.dumps, ensure_ascii off), raise_exception() and
 * strftime_now(), the clock at 2024-07-26 13:05:09 UTC. The interpreter
 * must give them byte for byte.
 *
 * The refusals are its own words (jinja2's differ) and name the
 * construct and its line and column; the limits are each reached by a
 * template built to run into it, which must stop with JINJA_E_LIMIT
 * naming it, quickly and having freed what it built.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "chat/jinja.h"

#include <cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* 2024-07-26 13:05:09 UTC, the clock of the expected renders */
#define NOW ((time_t)1721999109)

struct render_case {
    const char *name;
    const char *src;
    const char *ctx; /* JSON, or "" for none */
    const char *want;
};

/* ------------------------------------------------- jinja2's renders */

static const struct render_case statements[] = {
    {"for", "{% for x in [1, 2, 3] %}{{ x }},{% endfor %}", "", "1,2,3,"},
    {"loop vars",
     "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revi"
     "ndex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop"
     ".length }}|{% endfor %}",
     "", "1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|"},
    {"previtem nextitem",
     "{% for x in [1, 2, 3] %}[{{ loop.previtem }},{{ loop.nextitem }}]"
     "{% endfor %}",
     "", "[,2][1,3][2,]"},
    {"cycle",
     "{% for x in range(5) %}{{ loop.cycle('a', 'b', 'c') }}{% endfor %"
     "}",
     "", "abcab"},
    {"loop filter",
     "{% for m in messages if m.role != 'system' %}{{ loop.index }}/{{ "
     "loop.length }}:{{ m.content }}{{ ',' if not loop.last }}{% endfor"
     " %}",
     "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\""
     "}, {\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assist"
     "ant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"content\""
     ": \"Bye\"}], \"bos_token\": \"<s>\", \"add_generation_prompt\": t"
     "rue}",
     "1/3:Hi,2/3:Hello!,3/3:Bye"},
    {"for else",
     "{% for x in [] %}{{ x }}{% else %}none{% endfor %}|{% for x in [1"
     "] if x > 1 %}{{ x }}{% else %}filtered{% endfor %}",
     "", "none|filtered"},
    {"unpack items",
     "{% for k, v in {'a': 1, 'b': [2]}.items() %}{{ k }}={{ v }};{% en"
     "dfor %}",
     "", "a=1;b=[2];"},
    {"unpack parens",
     "{% for (a, b) in [[1, 2], [3, 4]] %}{{ a * b }} {% endfor %}", "",
     "2 12 "},
    {"for over dict and string",
     "{% for k in {'z': 1, 'y': 2} %}{{ k }}{% endfor %} {% for c in 'h"
     "\303\251llo' %}[{{ c }}]{% endfor %}",
     "", "zy [h][\303\251][l][l][o]"},
    {"break continue",
     "{% for x in range(10) %}{% if x is odd %}{% continue %}{% endif %"
     "}{% if x > 6 %}{% break %}{% endif %}{{ x }}{% endfor %}",
     "", "0246"},
    {"nested loop",
     "{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{"
     " b }} {% endfor %}{{ loop.index }}|{% endfor %}",
     "", "11x 21y 1|12x 22y 2|"},
    {"if elif else",
     "{% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% "
     "else %}many{% endif %} {% endfor %}",
     "", "one two many "},
    {"set", "{% set x = 1 %}{% set y = x + 1 %}{{ x }}{{ y }}", "", "12"},
    {"set tuple",
     "{% set a, b = [1, 2] %}{% set c = 3, 4 %}{{ a }}{{ b }}{{ c }}", "",
     "12(3, 4)"},
    {"set block",
     "{% set x %}  <{{ 1 + 1 }}>\n"
     "{% endset %}[{{ x }}]",
     "", "[  <2>\n]"},
    {"set block filter", "{% set x | upper %}abc{% endset %}{{ x }}", "",
     "ABC"},
    {"namespace",
     "{% set ns = namespace(n=0, seen=[]) %}{% for x in [3, 4] %}{% set"
     " ns.n = ns.n + x %}{% endfor %}{{ ns.n }} {{ ns }}",
     "", "7 <Namespace {'n': 7, 'seen': []}>"},
    {"macro",
     "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endm"
     "acro %}{{ greet('a') }} {{ greet('b', '\?') }} {{ greet(punct='.'"
     ", name='c') }}",
     "", "Hi a! Hi b\? Hi c."},
    {"macro missing arg",
     "{% macro m(a, b) %}[{{ a }}|{{ b }}|{{ b is defined }}]{% endmacr"
     "o %}{{ m(1) }}",
     "", "[1||False]"},
    {"macro varargs",
     "{% macro m(a) %}{{ a }} {{ varargs }} {{ kwargs }}{% endmacro %}{"
     "{ m(1, 2, 3, k='v') }}",
     "", "1 (2, 3) {'k': 'v'}"},
    {"macro recursion",
     "{% macro count(n) %}{% if n > 0 %}{{ n }}{{ count(n - 1) }}{% end"
     "if %}{% endmacro %}{{ count(5) }}",
     "", "54321"},
    {"macro value", "{% macro m() %}x{% endmacro %}{{ m }} {{ m() ~ m() }}", "",
     "<Macro 'm'> xx"},
    {"call",
     "{% macro box(title) %}[{{ title }}: {{ caller() }}]{% endmacro %}"
     "{% call box('t') %}body {{ 1 + 1 }}{% endcall %}",
     "", "[t: body 2]"},
    {"call with args",
     "{% macro each(xs) %}{% for x in xs %}{{ caller(x, loop.index) }}{"
     "% endfor %}{% endmacro %}{% call(item, i) each(['a', 'b']) %}{{ i"
     " }}={{ item }};{% endcall %}",
     "", "1=a;2=b;"},
    {"raw", "{% raw %}{{ not }} {% evaluated %}{% endraw %}", "",
     "{{ not }} {% evaluated %}"},
    {"comment", "a{# a comment {{ x }} #}b", "", "ab"},
    {"generation", "{% generation %}gen {{ 1 }}{% endgeneration %}!", "",
     "gen 1!"},
    {"filter block", "{% filter upper %}abc {{ 'd' }}{% endfilter %}", "",
     "ABC D"},
};

static const struct render_case whitespace[] = {
    {"trim_blocks",
     "{% if true %}\nline\n"
     "{% endif %}\nend",
     "", "line\nend"},
    {"lstrip_blocks",
     "a\n    {% if true %}\n"
     "    b\n    {% endif %}\n"
     "c",
     "", "a\n    b\nc"},
    {"no lstrip before output", "a\n    {{ 'b' }}\nc", "", "a\n    b\nc"},
    {"lstrip mid-line", "a  {% if true %}b{% endif %}", "", "a  b"},
    {"minus", "a   {%- if true -%}   b   {%- endif -%}   c", "", "abc"},
    {"minus output", "a \n {{- 'b' -}} \n c", "", "abc"},
    {"plus lstrip", "a\n    {%+ if true %}b{% endif %}", "", "a\n    b"},
    {"plus trim", "{% if true +%}\nb{% endif %}", "", "\nb"},
    {"comment lstrip trim", "a\n   {# c #}\nb", "", "a\nb"},
    {"comment minus", "a   {#- c -#}   b", "", "ab"},
    {"trailing newline", "a\n", "", "a"},
    {"two trailing newlines", "a\n\n", "", "a\n"},
    {"crlf",
     "a\r\n{% if true %}\r\n"
     "b\r\n{% endif %}\r\n",
     "", "a\nb\n"},
    {"raw whitespace",
     "a\n  {% raw %}\n x {% endraw %}\n"
     "b",
     "", "a\n\n x b"},
    {"raw minus", "a  {%- raw -%}  x  {%- endraw -%}  b", "", "axb"},
    {"unicode space lstrip", "\343\200\200 {% if true %}b{% endif %}", "", "b"},
    {"loop body lines",
     "{% for x in [1, 2] %}\n"
     "  - {{ x }}\n{% endfor %}\n",
     "", "  - 1\n  - 2\n"},
    {"chatml",
     "{% for message in messages %}{{ '<|im_start|>' + message['role'] "
     "+ '\n' + message['content'] + '<|im_end|>' + '\n"
     "' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>ass"
     "istant\n' }}{% endif %}",
     "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\""
     "}, {\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assist"
     "ant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"content\""
     ": \"Bye\"}], \"bos_token\": \"<s>\", \"add_generation_prompt\": t"
     "rue}",
     "<|im_start|>system\nBe brief.<|im_end|>\n"
     "<|im_start|>user\nHi<|im_end|>\n"
     "<|im_start|>assistant\n"
     "Hello!<|im_end|>\n<|im_start|>user\n"
     "Bye<|im_end|>\n<|im_start|>assistant\n"},
    {"indented template",
     "{%- for m in messages %}\n"
     "    {%- if m.role == 'user' %}\n"
     "        {{- '[INST] ' + m.content + ' [/INST]' }}\n"
     "    {%- elif m.role == 'assistant' %}\n"
     "        {{- ' ' + m.content + '</s>' }}\n"
     "    {%- endif %}\n{%- endfor %}\n",
     "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\""
     "}, {\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assist"
     "ant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"content\""
     ": \"Bye\"}], \"bos_token\": \"<s>\", \"add_generation_prompt\": t"
     "rue}",
     "[INST] Hi [/INST] Hello!</s>[INST] Bye [/INST]"},
};

static const struct render_case scoping[] = {
    {"set in loop stays",
     "{% set x = 'out' %}{% for i in [1, 2] %}{% set x = i %}[{{ x }}]{"
     "% endfor %}{{ x }}",
     "", "[1][2]out"},
    {"loop iteration fresh",
     "{% for i in [1, 2] %}{% if i == 2 %}[{{ x }}]{% endif %}{% set x "
     "= i %}{% endfor %}",
     "", "[]"},
    {"outer read in loop",
     "{% set x = 5 %}{% for i in [1, 2] %}[{{ x }}]{% set x = i %}{% en"
     "dfor %}{{ x }}",
     "", "[5][5]5"},
    {"if no scope", "{% if true %}{% set x = 1 %}{% endif %}{{ x }}", "", "1"},
    {"namespace out of loop",
     "{% set ns = namespace(last='') %}{% for m in messages %}{% set ns"
     ".last = m.role %}{% endfor %}{{ ns.last }}",
     "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\""
     "}, {\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assist"
     "ant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"content\""
     ": \"Bye\"}], \"bos_token\": \"<s>\", \"add_generation_prompt\": t"
     "rue}",
     "user"},
    {"macro scope",
     "{% set x = 1 %}{% macro m() %}{% set x = 2 %}{{ x }}{% endmacro %"
     "}{{ m() }}{{ x }}",
     "", "21"},
    {"macro sees later globals",
     "{% macro m() %}{{ g }}{% endmacro %}{% set g = 'late' %}{{ m() }}", "",
     "late"},
    {"macro sees context",
     "{% macro m() %}{{ bos_token }}{% endmacro %}{{ m() }}",
     "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\""
     "}, {\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assist"
     "ant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"content\""
     ": \"Bye\"}], \"bos_token\": \"<s>\", \"add_generation_prompt\": t"
     "rue}",
     "<s>"},
    {"loop var after loop", "{% for x in [1] %}{% endfor %}[{{ x }}]", "",
     "[]"},
    {"caller sees call site",
     "{% macro m() %}{{ caller() }}{% endmacro %}{% for i in [7] %}{% c"
     "all m() %}{{ i }}{% endcall %}{% endfor %}",
     "", "7"},
};

static const struct render_case expressions[] = {
    {"strings",
     "{{ 'single' }} {{ \"double\" }} {{ 'it\\'s' }} {{ \"a\\tb\\\\c\\n"
     "\" }} {{ '\\x41\\u00e9\\U0001F600' }} {{ 'a' 'b' }} {{ '\\d' }}",
     "",
     "single double it's a\tb\\c\n"
     " A\303\251\360\237\230\200 ab \\d"},
    {"numbers",
     "{{ 42 }} {{ -7 }} {{ 1_000 }} {{ 0x1f }} {{ 0o17 }} {{ 0b101 }} {"
     "{ 1.5 }} {{ 1e3 }} {{ 2.5e-3 }}",
     "", "42 -7 1000 31 15 5 1.5 1000.0 0.0025"},
    {"constants",
     "{{ true }} {{ True }} {{ false }} {{ none }} {{ None }} [{{ none|"
     "string }}]",
     "", "True True False None None [None]"},
    {"containers",
     "{{ [1, 'a', none] }} {{ (1,) }} {{ (1, 2) }} {{ () }} {{ {'a': 1,"
     " 'b': [true]} }} {{ [] }} {{ {} }}",
     "", "[1, 'a', None] (1,) (1, 2) () {'a': 1, 'b': [True]} [] {}"},
    {"attribute and item",
     "{{ m.role }} {{ m['content'] }} {{ xs[0] }} {{ xs[-1] }} {{ xs.1 "
     "}} {{ m.missing }}|{{ xs[9] }}|",
     "{\"m\": {\"role\": \"user\", \"content\": \"hi\"}, \"xs\": [10, 2"
     "0, 30]}",
     "user hi 10 30 20 ||"},
    {"slices",
     "{{ xs[1:] }} {{ xs[:-1] }} {{ xs[::-1] }} {{ xs[::2] }} {{ xs[-2:"
     "] }} {{ xs[5:] }} {{ 'h\303\251llo'[1:3] }} {{ 'h\303\251llo'[::-"
     "1] }} {{ (1, 2, 3)[1:] }}",
     "{\"xs\": [1, 2, 3, 4]}",
     "[2, 3, 4] [1, 2, 3] [4, 3, 2, 1] [1, 3] [3, 4] [] \303\251l oll\303"
     "\251h (2, 3)"},
    {"messages reversed",
     "{% for m in messages[::-1] %}{{ m.role[0] }}{% endfor %}",
     "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\""
     "}, {\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assist"
     "ant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"content\""
     ": \"Bye\"}], \"bos_token\": \"<s>\", \"add_generation_prompt\": t"
     "rue}",
     "uaus"},
    {"calls",
     "{{ range(3)|list }} {{ range(1, 10, 4)|list }} {{ dict(a=1, b=2) "
     "}} {{ 'a-b'.split('-') }} {{ 'abc'.replace('b', 'x', 1) }}",
     "", "[0, 1, 2] [1, 5, 9] {'a': 1, 'b': 2} ['a', 'b'] axc"},
    {"filters with args",
     "{{ xs|map(attribute='name')|join(', ') }} {{ xs|tojson(indent=Non"
     "e) }}",
     "{\"xs\": [{\"name\": \"a\"}, {\"name\": \"b\"}]}",
     "a, b [{\"name\": \"a\"}, {\"name\": \"b\"}]"},
    {"tests",
     "{{ 3 is equalto 3 }} {{ x is not none }} {{ 4 is divisibleby 2 }}"
     " {{ 4 is divisibleby(3) }} {{ 'a' is string and 1 is number }} {{"
     " none is not defined }}",
     "{\"x\": 1}", "True True True False True False"},
    {"in",
     "{{ 1 in [1, 2] }} {{ 'b' in 'abc' }} {{ 'k' in {'k': 1} }} {{ 3 n"
     "ot in [1] }} {{ 'x' not in 'xyz' }}",
     "", "True True True True False"},
    {"concat", "{{ 'a' ~ 1 ~ none ~ true ~ [1] ~ 1.5 }}", "",
     "a1NoneTrue[1]1.5"},
    {"arithmetic",
     "{{ 1 + 2 }} {{ 7 - 10 }} {{ 3 * 4 }} {{ 7 / 2 }} {{ 8 / 2 }} {{ 7"
     " // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2"
     " ** 10 }} {{ 2 ** -1 }} {{ 2 ** 3 ** 2 }} {{ 1.5 + 1 }} {{ true +"
     " 1 }}",
     "", "3 -3 12 3.5 4.0 3 -4 1 2 -2 1024 0.5 64 2.5 2"},
    {"float arithmetic",
     "{{ 0.1 + 0.2 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 1e300 * 10 }} {{"
     " 2.0 ** 0.5 }} {{ 10 / 3 }}",
     "",
     "0.30000000000000004 3.0 0.5 1e+301 1.4142135623730951 3.333333333"
     "3333335"},
    {"sequences arithmetic",
     "{{ 'ab' * 3 }} {{ 2 * 'x' }} {{ 'a' * -1 }} {{ [1, 2] + [3] }} {{"
     " [0] * 3 }} {{ (1,) + (2,) }}",
     "", "ababab xx  [1, 2, 3] [0, 0, 0] (1, 2)"},
    {"comparisons",
     "{{ 1 < 2 }} {{ 2 <= 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{"
     " 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 1 != '1' }} {{ tr"
     "ue == 1 }} {{ (1, 2) == [1, 2] }} {{ {'a': 1} == {'a': 1} }}",
     "", "True False True True True False True True True False True"},
    {"and or not",
     "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }}|{{ none or [] }"
     "} {{ not 0 }} {{ not 'a' }} {{ not 1 == 2 }}",
     "", "x b |[] True False True"},
    {"conditional",
     "{{ 'y' if 1 else 'n' }} {{ 'y' if 0 else 'n' }} [{{ 'y' if 0 }}] "
     "{{ 1 if 0 else 2 if 0 else 3 }}",
     "", "y n [] 3"},
    {"unary",
     "{{ -3|abs }} {{ -(3) }} {{ -2 ** 2 }} {{ +5 }} {{ - -1 }} {{ -x.n"
     " }}",
     "{\"x\": {\"n\": 4}}", "3 -3 4 5 1 -4"},
    {"parentheses", "{{ (1 + 2) * 3 }} {{ ((('a'))) }} {{ (1 ~ 2)|length }}",
     "", "9 a 2"},
};

static const struct render_case values[] = {
    {"str of values",
     "{{ none }} {{ true }} {{ false }} {{ 1.0 }} {{ 1e-05 }} {{ 1e16 }"
     "} {{ 1e15 }} {{ 0.0001 }} {{ -0.0 }} {{ 123456789.125 }} {{ 1/3 }"
     "}",
     "",
     "None True False 1.0 1e-05 1e+16 1000000000000000.0 0.0001 -0.0 12"
     "3456789.125 0.3333333333333333"},
    {"repr",
     "{{ ['a', 1, 1.5, none, true, ('t',), {'k': 'v'}] }} {{ [\"it's\"]"
     " }} {{ ['say \"hi\"'] }} {{ ['both \\' \"'] }} {{ ['\\n\\t\\\\'] "
     "}} {{ ['\303\251\\x01\\x7f'] }}",
     "",
     "['a', 1, 1.5, None, True, ('t',), {'k': 'v'}] [\"it's\"] ['say \""
     "hi\"'] ['both \\' \"'] ['\\n\\t\\\\'] ['\303\251\\x01\\x7f']"},
    {"json numbers",
     "{{ xs }} {{ xs[0] is integer }} {{ xs[1] is float }} {{ xs[2] is "
     "float }}",
     "{\"xs\": [3, 2.5, 1e+300, -7]}", "[3, 2.5, 1e+300, -7] True True True"},
    {"truthiness",
     "{% for v in [0, 1, '', 'a', [], [0], {}, none, 0.0] %}{{ 'T' if v"
     " else 'F' }}{% endfor %}",
     "", "FTFTFTFFF"},
    {"int float",
     "{{ 3 / 1 }} {{ 3 // 1 }} {{ 3.0 // 1 }} {{ 2 * 0.5 }} {{ 10 % 4.0"
     " }}",
     "", "3.0 3 3.0 1.0 2.0"},
    {"unicode",
     "{{ 'h\303\251llo w\303\266rld'|upper }} {{ '\303\200\303\211\303\216"
     "'|lower }} {{ 'stra\303\237e'|upper }} {{ '\316\261\316\262\316\263"
     "'|upper }} {{ '\320\237\320\240\320\230\320\222\320\225\320\242'|"
     "lower }} {{ '\346\227\245\346\234\254'|length }}",
     "",
     "H\303\211LLO W\303\226RLD \303\240\303\251\303\256 STRASSE \316\221"
     "\316\222\316\223 \320\277\321\200\320\270\320\262\320\265\321\202"
     " 2"},
};

static const struct render_case undefined[] = {
    {"renders empty", "[{{ nothing }}][{{ m.missing }}][{{ xs[5] }}]",
     "{\"m\": {}, \"xs\": []}", "[][][]"},
    {"falsy and empty",
     "{{ 'T' if nothing else 'F' }} {{ nothing|length }} {% for x in no"
     "thing %}x{% endfor %}{{ nothing|list }} {{ nothing is defined }} "
     "{{ nothing is undefined }} {{ m.x is defined }}",
     "{\"m\": {}}", "F 0 [] False True False"},
    {"default",
     "{{ nothing|default('d') }} {{ none|default('d') }} {{ ''|default("
     "'d', true) }} {{ 0|d('zero', boolean=true) }} {{ nothing|d }}|",
     "", "d None d zero |"},
    {"compare",
     "{{ nothing == nothing }} {{ nothing == none }} {{ nothing in [1] "
     "}} {{ 1 in nothing }} {{ nothing ~ 'x' }}",
     "", "True False False False x"},
    {"filters on undefined",
     "[{{ nothing|trim }}][{{ nothing|upper }}][{{ nothing|join }}][{{ "
     "nothing|first }}][{{ nothing|string }}][{{ nothing|e }}]",
     "", "[][][][][][]"},
    {"dict key as attribute",
     "{{ m.content }} {{ m.get('content') }} {{ m.items()|list }} {{ m."
     "keys()|list }}",
     "{\"m\": {\"content\": \"c\", \"items\": \"shadowed\"}}",
     "c c [('content', 'c'), ('items', 'shadowed')] ['content', 'items'"
     "]"},
};

static const struct render_case methods[] = {
    {"startswith endswith",
     "{{ 'hello'.startswith('he') }} {{ 'hello'.startswith(('x', 'h')) "
     "}} {{ 'hello'.endswith('lo') }} {{ 'hello'.endswith(('a', 'b')) }"
     "} {{ 'hello'.startswith('l', 2) }}",
     "", "True True True False True"},
    {"split",
     "{{ 'a,b,,c'.split(',') }} {{ '  a  b '.split() }} {{ 'a b c'.spli"
     "t(' ', 1) }} {{ 'a b c'.split(maxsplit=1) }} {{ 'a b c'.rsplit(' "
     "', 1) }} {{ ''.split() }} {{ ''.split(',') }}",
     "",
     "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c'] ['a', 'b c'] ['a b', "
     "'c'] [] ['']"},
    {"strip",
     "[{{ '  x  '.strip() }}][{{ '  x  '.lstrip() }}][{{ '  x  '.rstrip"
     "() }}][{{ 'xxaxx'.strip('x') }}][{{ 'abcab'.lstrip('ab') }}][{{ '"
     "\\n\\tx\\u3000'.strip() }}]",
     "", "[x][x  ][  x][a][cab][x]"},
    {"case",
     "{{ 'aBc'.upper() }} {{ 'aBc'.lower() }} {{ 'hello world'.title() "
     "}} {{ \"it's a-b\".title() }} {{ 'hELLO'.capitalize() }}",
     "", "ABC abc Hello World It'S A-B Hello"},
    {"replace find count",
     "{{ 'aaa'.replace('a', 'b') }} {{ 'aaa'.replace('a', 'b', 2) }} {{"
     " 'abc'.find('c') }} {{ 'abc'.find('z') }} {{ 'h\303\251llo'.find("
     "'l') }} {{ 'abab'.count('ab') }} {{ 'aaa'.count('') }}",
     "", "bbb bba 2 -1 2 2 4"},
    {"join",
     "{{ ', '.join(['a', 'b']) }} {{ ''.join('abc') }} {{ '-'.join(xs) "
     "}}",
     "{\"xs\": [\"x\", \"y\"]}", "a, b abc x-y"},
    {"qwen3 chain",
     "{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstr"
     "ip('\\n') }}|{{ c.split('</think>')[-1].lstrip('\\n') }}",
     "{\"c\": \"<think>\\nreasoning here\\n</think>\\n\\nThe answer.\"}",
     "reasoning here|The answer."},
    {"list methods",
     "{{ [1, 2, 1].count(1) }} {{ (1, 2).index(2) }} {{ ['a', 'b'].inde"
     "x('b') }} {{ [[1], [1]].count([1]) }}",
     "", "2 1 1 2"},
    {"dict methods",
     "{% set d = {'a': 1, 'b': 2} %}{{ d.items()|list }} {{ d.keys()|li"
     "st }} {{ d.values()|list }} {{ d.get('a') }} {{ d.get('z') }} {{ "
     "d.get('z', 'dflt') }} {{ d['b'] }}",
     "", "[('a', 1), ('b', 2)] ['a', 'b'] [1, 2] 1 None dflt 2"},
};

static const struct render_case filters[] = {
    {"trim length count",
     "[{{ '  a b \\n'|trim }}] {{ 'h\303\251llo'|length }} {{ [1, 2]|co"
     "unt }} {{ {'a': 1}|length }} {{ 'xxhixx'|trim('x') }}",
     "", "[a b] 5 2 1 hi"},
    {"join map",
     "{{ [1, 2, 3]|join }} {{ [1, 2, 3]|join('|') }} {{ xs|join(', ', a"
     "ttribute='n') }} {{ xs|map(attribute='n')|list }} {{ ['a', 'b']|m"
     "ap('upper')|list }} {{ ['a b', 'c']|map('replace', ' ', '_')|list"
     " }} {{ xs|map(attribute='q', default='-')|list }}",
     "{\"xs\": [{\"n\": 1}, {\"n\": 2}]}",
     "123 1|2|3 1, 2 [1, 2] ['A', 'B'] ['a_b', 'c'] ['-', '-']"},
    {"select reject",
     "{{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('odd"
     "')|list }} {{ [0, 1, '', 'a']|select|list }} {{ [1, 2, 3]|select("
     "'greaterthan', 1)|list }} {{ [1, 2, 3]|select('in', [1, 3])|list "
     "}}",
     "", "[1, 3] [2, 4] [1, 'a'] [2, 3] [1, 3]"},
    {"selectattr rejectattr",
     "{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='"
     "content')|list }} {{ messages|rejectattr('role', 'equalto', 'user"
     "')|list|length }} {{ [{'a': 0}, {'a': 1}]|selectattr('a')|list }}",
     "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\""
     "}, {\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assist"
     "ant\", \"content\": \"Hello!\"}, {\"role\": \"user\", \"content\""
     ": \"Bye\"}], \"bos_token\": \"<s>\", \"add_generation_prompt\": t"
     "rue}",
     "['Hi', 'Bye'] 2 [{'a': 1}]"},
    {"first last items",
     "{{ [1, 2]|first }} {{ [1, 2]|last }} {{ 'abc'|first }} {{ 'abc'|l"
     "ast }} {{ {'a': 1}|items|list }} {{ []|first }}|",
     "", "1 2 a c [('a', 1)] |"},
    {"string int float",
     "{{ 5|string ~ 'x' }} {{ '42'|int }} {{ '3.9'|int }} {{ 'x'|int }}"
     " {{ 'x'|int(7) }} {{ '0x1A'|int(base=16) }} {{ ' 12 '|int }} {{ 3"
     ".9|int }} {{ '2.5'|float }} {{ 'x'|float }} {{ 3|float }}",
     "", "5x 42 3 0 7 26 12 3 2.5 0.0 3.0"},
    {"list unique",
     "{{ 'ab'|list }} {{ {'a': 1}|list }} {{ (1, 2)|list }} {{ ['a', 'A"
     "', 'b', 'a']|unique|list }} {{ ['a', 'A']|unique(case_sensitive=t"
     "rue)|list }} {{ [{'k': 1}, {'k': 1}, {'k': 2}]|unique(attribute='"
     "k')|list }}",
     "",
     "['a', 'b'] ['a'] [1, 2] ['a', 'b'] ['a', 'A'] [{'k': 1}, {'k': 2}"
     "]"},
    {"indent",
     "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\"
     "n\\nb'|indent(2, blank=true) }}|{{ 'a\\nb'|indent('> ') }}|{{ 'x'"
     "|indent(first=true) }}",
     "",
     "a\n    b\n\n    c|  a\n"
     "  b|a\n  \n  b|a\n> b|    x"},
    {"case filters",
     "{{ 'hello WORLD'|lower }} {{ 'hello'|upper }} {{ 'hello world'|ca"
     "pitalize }} {{ 'hello world-foo(bar) x'|title }}",
     "", "hello world HELLO Hello world Hello World-Foo(Bar) X"},
    {"replace reverse",
     "{{ 'hello'|replace('l', 'L') }} {{ 'hello'|replace('l', 'L', 1) }"
     "} {{ 'abc'|reverse }} {{ [1, 2, 3]|reverse|list }}",
     "", "heLLo heLlo cba [3, 2, 1]"},
    {"safe escape",
     "{{ '<b>'|safe }} {{ '<a href=\"x\">&\\'</a>'|e }} {{ '<i>'|escape"
     " }} {{ ('<x>'|e)|e }} {{ '<s>'|safe + '<t>' }}",
     "",
     "<b> &lt;a href=&#34;x&#34;&gt;&amp;&#39;&lt;/a&gt; &lt;i&gt; &lt;"
     "x&gt; <s>&lt;t&gt;"},
    {"numbers",
     "{{ -5|abs }} {{ -2.5|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2."
     "675|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(0, 'floor"
     "') }} {{ 7|round }} {{ [1, 2.5, 3]|sum }} {{ [{'v': 2}, {'v': 3}]"
     "|sum(attribute='v') }}",
     "", "5 2.5 2.0 4.0 2.67 3.0 2.0 7 6.5 5"},
    {"sort",
     "{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'a']|sort }} {{ ['b', 'A', 'a'"
     "]|sort(case_sensitive=true) }} {{ [3, 1, 2]|sort(reverse=true) }}"
     " {{ [{'n': 2}, {'n': 1}]|sort(attribute='n') }}",
     "",
     "[1, 2, 3] ['A', 'a', 'b'] ['A', 'a', 'b'] [3, 2, 1] [{'n': 1}, {'"
     "n': 2}]"},
    {"dictsort min max",
     "{{ {'b': 1, 'a': 2}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='"
     "value') }} {{ [3, 1, 2]|min }} {{ [3, 1, 2]|max }} {{ ['b', 'A']|"
     "min }} {{ []|max }}|",
     "", "[('a', 2), ('b', 1)] [('b', 1), ('a', 2)] 1 3 A |"},
    {"generators",
     "{% set g = [1, 2, 3]|select('odd') %}{{ g|first }} {{ g|list }} {"
     "{ g|list }} {{ 'T' if []|select else 'F' }}",
     "", "1 [3] [] T"},
};

static const struct render_case test_kinds[] = {
    {"kind tests",
     "{{ 'a' is string }} {{ 1 is number }} {{ 1.5 is number }} {{ true"
     " is number }} {{ 1 is integer }} {{ true is integer }} {{ 1.0 is "
     "float }} {{ true is boolean }} {{ {} is mapping }} {{ [] is mappi"
     "ng }} {{ none is none }}",
     "", "True True True True True False True True True False True"},
    {"iterable sequence",
     "{{ 'a' is iterable }} {{ [] is iterable }} {{ 1 is iterable }} {{"
     " nothing is iterable }} {{ [] is sequence }} {{ {} is sequence }}"
     " {{ 1 is sequence }}",
     "", "True True False True True True False"},
    {"true false",
     "{{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is f"
     "alse }}",
     "", "True False True False"},
    {"comparison tests",
     "{{ 1 is eq 1 }} {{ 1 is ne 2 }} {{ 2 is gt 1 }} {{ 2 is lt 1 }} {"
     "{ 'a' is equalto 'a' }}",
     "", "True True True False True"},
    {"number tests",
     "{{ 3 is odd }} {{ 3 is even }} {{ 4 is even }} {{ 10 is divisible"
     "by 5 }} {{ 10 is divisibleby 3 }}",
     "", "True False True True False"},
    {"in lower upper",
     "{{ 2 is in [1, 2] }} {{ 'abc' is lower }} {{ 'aBc' is lower }} {{"
     " 'ABC' is upper }} {{ '1' is upper }}",
     "", "True True False True False"},
    {"defined",
     "{{ x is defined }} {{ y is defined }} {{ y is undefined }} {{ x i"
     "s not defined }}",
     "{\"x\": null}", "True False True False"},
};

static const struct render_case tojson[] = {
    {"default", "{{ x|tojson }}",
     "{\"x\": {\"a\": [1, 2.5, null, true, false], \"b\": \"s\", \"c\":"
     " {}, \"d\": []}}",
     "{\"a\": [1, 2.5, null, true, false], \"b\": \"s\", \"c\": {}, \"d"
     "\": []}"},
    {"indent 4", "{{ x|tojson(indent=4) }}",
     "{\"x\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \""
     "object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"r"
     "equired\": [\"city\"]}, \"e\": [], \"f\": {}}}",
     "{\n    \"name\": \"get_weather\",\n"
     "    \"parameters\": {\n"
     "        \"type\": \"object\",\n"
     "        \"properties\": {\n"
     "            \"city\": {\n"
     "                \"type\": \"string\"\n"
     "            }\n        },\n"
     "        \"required\": [\n"
     "            \"city\"\n"
     "        ]\n    },\n    \"e\": [],\n"
     "    \"f\": {}\n}"},
    {"indent 2 list", "{{ [1, [2, 3], {'a': []}]|tojson(indent=2) }}", "",
     "[\n  1,\n  [\n    2,\n"
     "    3\n  ],\n  {\n    \"a\": []\n"
     "  }\n]"},
    {"non-ascii",
     "{{ 'h\303\251llo \360\237\230\200 \346\227\245\346\234\254'|tojso"
     "n }} {{ 'h\303\251llo \360\237\230\200'|tojson(ensure_ascii=true)"
     " }}",
     "",
     "\"h\303\251llo \360\237\230\200 \346\227\245\346\234\254\" \"h\\u"
     "00e9llo \\ud83d\\ude00\""},
    {"control characters",
     "{{ '\"\\\\\\n\\r\\t\\b\\f\\x01\\x1f\\x7f'|tojson }} {{ '\\x7f\\u2"
     "028'|tojson(ensure_ascii=true) }}",
     "", "\"\\\"\\\\\\n\\r\\t\\b\\f\\u0001\\u001f\177\" \"\\u007f\\u2028\""},
    {"floats",
     "{{ [1.0, 0.5, 1e-05, 1e16, 1e22, -0.0, 123456789.125, 0.1]|tojson"
     " }}",
     "", "[1.0, 0.5, 1e-05, 1e+16, 1e+22, -0.0, 123456789.125, 0.1]"},
    {"separators sort_keys",
     "{{ {'b': 1, 'a': [1, 2]}|tojson(separators=(',', ':')) }} {{ {'b'"
     ": 1, 'a': 2}|tojson(sort_keys=true) }}",
     "", "{\"b\":1,\"a\":[1,2]} {\"a\": 2, \"b\": 1}"},
    {"keys and tuples",
     "{{ {1: 'a', true: 'b', none: 'c'}|tojson }} {{ (1, 'a')|tojson }}"
     " {{ none|tojson }}",
     "", "{\"1\": \"b\", \"null\": \"c\"} [1, \"a\"] null"},
    {"tool call arguments",
     "{% for t in messages[0].tool_calls %}{{ t.function.arguments|tojs"
     "on }}{% endfor %}",
     "{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"fun"
     "ction\": {\"name\": \"f\", \"arguments\": {\"city\": \"Paris\", \""
     "n\": 2}}}]}]}",
     "{\"city\": \"Paris\", \"n\": 2}"},
};

static const struct render_case globals[] = {
    {"range",
     "{{ range(4)|list }} {{ range(2, 5)|list }} {{ range(10, 0, -3)|li"
     "st }} {{ range(0)|list }}",
     "", "[0, 1, 2, 3] [2, 3, 4] [10, 7, 4, 1] []"},
    {"strftime_now",
     "{{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%d %H:%M:%S"
     "') }}",
     "", "26 Jul 2024 2024-07-26 13:05:09"},
    {"date string",
     "{%- if not date_string is defined %}{%- set date_string = '26 Jul"
     " 2024' %}{%- endif %}Today Date: {{ date_string }}",
     "", "Today Date: 26 Jul 2024"},
    {"namespace dict",
     "{{ namespace(a=1).a }} {{ namespace({'b': 2}).b }} {{ dict(x=1)['"
     "x'] }} {{ dict({'y': 2}, z=3) }}",
     "", "1 2 1 {'y': 2, 'z': 3}"},
};

/* ----------------------------------------------------------- helpers */

/* src compiled and rendered with ctx (JSON or NULL) within limits: the
 * status, with the output in *out (the caller frees it) or the error in
 * *err. */
static jinja_status render(const char *src, size_t len, const char *ctx,
                           const struct jinja_limits *limits, char **out,
                           struct jinja_error *err)
{
    *out = NULL;
    jinja_status st;
    struct jinja_template *t = jinja_compile(src, len, &st, err);
    if (!t)
        return st;
    cJSON *vars = NULL;
    if (ctx && ctx[0]) {
        vars = cJSON_Parse(ctx);
        assert_non_null(vars);
    }
    size_t out_len = 0;
    st = jinja_render(t, vars, limits, NOW, out, &out_len, err);
    if (st == JINJA_OK)
        assert_int_equal(strlen(*out), out_len);
    else
        assert_null(*out);
    cJSON_Delete(vars);
    jinja_free(t);
    return st;
}

static void run_cases(const struct render_case *cases, size_t n)
{
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        char *out;
        struct jinja_error err;
        const jinja_status st = render(cases[i].src, strlen(cases[i].src),
                                       cases[i].ctx, NULL, &out, &err);
        if (st != JINJA_OK) {
            print_error("%s: status %d: %s\n", cases[i].name, st, err.message);
            failed++;
        } else if (strcmp(out, cases[i].want) != 0) {
            print_error("%s:\n  want \"%s\"\n  got  \"%s\"\n", cases[i].name,
                        cases[i].want, out);
            failed++;
        }
        free(out);
    }
    assert_int_equal(failed, 0);
}

#define CASES(table)                                                           \
    static void test_##table(void **state)                                     \
    {                                                                          \
        (void)state;                                                           \
        run_cases(table, sizeof table / sizeof table[0]);                      \
    }

CASES(statements)
CASES(whitespace)
CASES(scoping)
CASES(expressions)
CASES(values)
CASES(undefined)
CASES(methods)
CASES(filters)
CASES(test_kinds)
CASES(tojson)
CASES(globals)

/* ------------------------------------------------------------ refusals */

struct error_case {
    const char *src;
    const char *ctx;
    jinja_status status;
    const char *message;
    unsigned line, column;
};

static void run_errors(const struct error_case *cases, size_t n)
{
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        char *out;
        struct jinja_error err;
        const jinja_status st = render(cases[i].src, strlen(cases[i].src),
                                       cases[i].ctx, NULL, &out, &err);
        if (st != cases[i].status || strcmp(err.message, cases[i].message) ||
            err.line != cases[i].line || err.column != cases[i].column) {
            print_error("%s:\n  want %d \"%s\" (%u:%u)\n  got  %d \"%s\" "
                        "(%u:%u)\n",
                        cases[i].src, cases[i].status, cases[i].message,
                        cases[i].line, cases[i].column, st,
                        st ? err.message : out, err.line, err.column);
            failed++;
        }
        free(out);
    }
    assert_int_equal(failed, 0);
}

/* What jinja_compile refuses: statements, filters and tests outside the
 * subset, and malformed templates, each named with where it is. */
static void test_compile_errors(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        {"{% include 'x' %}", NULL, JINJA_E_SYNTAX,
         "unsupported statement 'include' at line 1, column 4", 1, 4},
        {"line1\n  {% with x = 1 %}{% endwith %}", NULL, JINJA_E_SYNTAX,
         "unsupported statement 'with' at line 2, column 6", 2, 6},
        {"{{ x|wordcount }}", NULL, JINJA_E_SYNTAX,
         "unknown filter 'wordcount' at line 1, column 6", 1, 6},
        {"{{ x is odd_number }}", NULL, JINJA_E_SYNTAX,
         "unknown test 'odd_number' at line 1, column 9", 1, 9},
        {"{% if x %}{{ xs|map('nosuch') }}{% endif %}", NULL, JINJA_E_SYNTAX,
         "unknown filter 'nosuch' at line 1, column 17", 1, 17},
        {"{{ xs|selectattr('a', 'nosuch') }}", NULL, JINJA_E_SYNTAX,
         "unknown test 'nosuch' at line 1, column 7", 1, 7},
        {"{% for x in y %}", NULL, JINJA_E_SYNTAX,
         "unexpected end of template, expected 'endfor' or 'else' at line "
         "1, column 17",
         1, 17},
        {"{% if x %}{% endfor %}", NULL, JINJA_E_SYNTAX,
         "unexpected 'endfor' at line 1, column 14", 1, 14},
        {"{{ 1 + }}", NULL, JINJA_E_SYNTAX,
         "unexpected end of print statement '}}' at line 1, column 8", 1, 8},
        {"{{ }}", NULL, JINJA_E_SYNTAX,
         "expected an expression, got end of print statement '}}' at line 1, "
         "column 4",
         1, 4},
        {"{{ a b }}", NULL, JINJA_E_SYNTAX,
         "expected end of print statement '}}', got 'b' at line 1, column 6", 1,
         6},
        {"{% break %}", NULL, JINJA_E_SYNTAX,
         "'break' outside a loop at line 1, column 4", 1, 4},
        {"{% for x in y %}{% macro m() %}{% continue %}{% endmacro %}"
         "{% endfor %}",
         NULL, JINJA_E_SYNTAX, "'continue' outside a loop at line 1, column 35",
         1, 35},
        {"{{ 'abc }}", NULL, JINJA_E_SYNTAX,
         "string not closed: missing ' at line 1, column 4", 1, 4},
        {"a\n{{ x", NULL, JINJA_E_SYNTAX,
         "tag not closed: missing '}}' at line 2, column 1", 2, 1},
        {"{% if x", NULL, JINJA_E_SYNTAX,
         "tag not closed: missing '%}' at line 1, column 1", 1, 1},
        {"{# comment", NULL, JINJA_E_SYNTAX,
         "comment not closed: missing '#}' at line 1, column 1", 1, 1},
        {"{% raw %}abc", NULL, JINJA_E_SYNTAX,
         "raw block not closed: missing '{% endraw %}' at line 1, column 1", 1,
         1},
        {"{% for x in y recursive %}{% endfor %}", NULL, JINJA_E_SYNTAX,
         "unsupported recursive loop at line 1, column 15", 1, 15},
        {"{{ f(*args) }}", NULL, JINJA_E_SYNTAX,
         "unsupported argument unpacking '*' at line 1, column 6", 1, 6},
        {"{{ 1 $ 2 }}", NULL, JINJA_E_SYNTAX,
         "unexpected character '$' at line 1, column 6", 1, 6},
        {"{{ 1 \x01 2 }}", NULL, JINJA_E_SYNTAX,
         "unexpected character \\x01 at line 1, column 6", 1, 6},
        {"{{ 99999999999999999999 }}", NULL, JINJA_E_SYNTAX,
         "integer literal too large at line 1, column 4", 1, 4},
        {"{% macro m(a=1, b) %}{% endmacro %}", NULL, JINJA_E_SYNTAX,
         "parameter without a default after one with a default at line 1, "
         "column 17",
         1, 17},
        {"{% call x %}{% endcall %}", NULL, JINJA_E_SYNTAX,
         "expected a call after 'call' at line 1, column 9", 1, 9},
        {"{% set true = 1 %}", NULL, JINJA_E_SYNTAX,
         "cannot assign to 'true' at line 1, column 8", 1, 8},
    };
    run_errors(cases, sizeof cases / sizeof cases[0]);
}

/* What a render refuses, as jinja2 raises it (the words mostly
 * Python's), with where in the template. */
static void test_runtime_errors(void **state)
{
    (void)state;
    static const struct error_case cases[] = {
        {"{{ m.x.y }}", "{\"m\": {}}", JINJA_E_RUNTIME,
         "'dict object' has no attribute 'x' at line 1, column 8", 1, 8},
        {"{{ nothing.y }}", NULL, JINJA_E_RUNTIME,
         "'nothing' is undefined at line 1, column 12", 1, 12},
        {"{{ nothing() }}", NULL, JINJA_E_RUNTIME,
         "'nothing' is undefined at line 1, column 4", 1, 4},
        {"{{ xs[3].y }}", "{\"xs\": [1]}", JINJA_E_RUNTIME,
         "list object has no element 3 at line 1, column 10", 1, 10},
        {"{{ nothing + 1 }}", NULL, JINJA_E_RUNTIME,
         "'nothing' is undefined at line 1, column 12", 1, 12},
        {"{{ 'a' + 1 }}", NULL, JINJA_E_RUNTIME,
         "can only concatenate str (not \"int\") to str at line 1, column 8", 1,
         8},
        {"{{ 1 / 0 }}", NULL, JINJA_E_RUNTIME,
         "division by zero at line 1, column 6", 1, 6},
        {"{{ 1 % 0 }}", NULL, JINJA_E_RUNTIME,
         "integer modulo by zero at line 1, column 6", 1, 6},
        {"{{ 'a' < 1 }}", NULL, JINJA_E_RUNTIME,
         "'<' not supported between instances of 'str' and 'int' at line 1, "
         "column 8",
         1, 8},
        {"{{ [1, 'a']|sort }}", NULL, JINJA_E_RUNTIME,
         "'<' not supported between instances of 'str' and 'int' at line 1, "
         "column 13",
         1, 13},
        {"{{ 'x'.zfill(3) }}", NULL, JINJA_E_RUNTIME,
         "unsupported method 'zfill' of str at line 1, column 8", 1, 8},
        {"{{ [].append(1) }}", NULL, JINJA_E_RUNTIME,
         "access to attribute 'append' of 'list' object is unsafe. at line 1, "
         "column 7",
         1, 7},
        {"{{ {}.update({}) }}", NULL, JINJA_E_RUNTIME,
         "access to attribute 'update' of 'dict' object is unsafe. at line 1, "
         "column 7",
         1, 7},
        {"{{ 'x'() }}", NULL, JINJA_E_RUNTIME,
         "'str' object is not callable at line 1, column 4", 1, 4},
        {"{{ {[1]: 2} }}", NULL, JINJA_E_RUNTIME,
         "unhashable type: 'list' at line 1, column 5", 1, 5},
        {"{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", NULL, JINJA_E_RUNTIME,
         "macro 'm' takes not more than 1 argument(s) at line 1, column 34", 1,
         34},
        {"{% macro m(a) %}{% endmacro %}{{ m(b=2) }}", NULL, JINJA_E_RUNTIME,
         "macro 'm' takes no keyword argument 'b' at line 1, column 34", 1, 34},
        {"{% set a, b = [1] %}", NULL, JINJA_E_RUNTIME,
         "not enough values to unpack (expected 2, got 1) at line 1, column 4",
         1, 4},
        {"{% set x = 1 %}{% set x.y = 2 %}", NULL, JINJA_E_RUNTIME,
         "cannot assign attribute on non-namespace object at line 1, column "
         "25",
         1, 25},
        {"{{ x[1:] }}", "{\"x\": 5}", JINJA_E_RUNTIME,
         "'int' object is not subscriptable at line 1, column 5", 1, 5},
        {"{{ [1].index(2) }}", NULL, JINJA_E_RUNTIME,
         "value is not in list at line 1, column 8", 1, 8},
        {"{{ 5|length }}", NULL, JINJA_E_RUNTIME,
         "object of type 'int' has no len() at line 1, column 6", 1, 6},
        {"{{ [1, 2]|select('odd')|length }}", NULL, JINJA_E_RUNTIME,
         "object of type 'generator' has no len() at line 1, column 25", 1, 25},
        {"{{ nothing|tojson }}", NULL, JINJA_E_RUNTIME,
         "Object of type Undefined is not JSON serializable at line 1, column "
         "12",
         1, 12},
        {"{{ 'a'.split('') }}", NULL, JINJA_E_RUNTIME,
         "empty separator at line 1, column 8", 1, 8},
        {"{{ 2 ** 64 }}", NULL, JINJA_E_RUNTIME,
         "integer overflow (past 64 bits) at line 1, column 6", 1, 6},
        {"{{ range(200000)|length }}", NULL, JINJA_E_RUNTIME,
         "Range too big. The sandbox blocks ranges larger than MAX_RANGE "
         "(100000). at line 1, column 4",
         1, 4},
        {"{{ x }}", "[1]", JINJA_E_RUNTIME, "the context is not a JSON object",
         0, 0},
        /* raise_exception(): the message as the template gave it, made
         * one line, where it was raised */
        {"{% if messages|length > 1 %}\n"
         "  {{- raise_exception('Conversation roles must alternate "
         "user/assistant/user/assistant/...') }}\n"
         "{% endif %}",
         "{\"messages\": [1, 2]}", JINJA_E_RAISED,
         "Conversation roles must alternate user/assistant/user/assistant/...",
         2, 7},
        {"{{ raise_exception('two\\nlines') }}", NULL, JINJA_E_RAISED,
         "two lines", 1, 4},
    };
    run_errors(cases, sizeof cases / sizeof cases[0]);
}

/* ------------------------------------------------------------- limits */

/* src must stop with JINJA_E_LIMIT and a message starting with want. */
static void expect_limit(const char *src, size_t len, const char *ctx,
                         const struct jinja_limits *limits, const char *want)
{
    char *out;
    struct jinja_error err;
    const clock_t start = clock();
    const jinja_status st = render(src, len, ctx, limits, &out, &err);
    const double seconds = (double)(clock() - start) / CLOCKS_PER_SEC;
    if (st != JINJA_E_LIMIT || strncmp(err.message, want, strlen(want)))
        fail_msg("%.60s: want a limit \"%s\", got %d \"%s\"", src, want, st,
                 st ? err.message : out);
    /* counted before spent: a limit is reached quickly (the bound is
     * loose, for the sanitizers' builds) */
    if (seconds > 5)
        fail_msg("%.60s: %.1f s to reach its limit", src, seconds);
    assert_null(out);
}

static void test_limit_steps(void **state)
{
    (void)state;
    const char *huge = "{% for i in range(10**9) %}{% endfor %}";
    expect_limit(huge, strlen(huge), NULL, NULL,
                 "past max_steps (1048576 loop iterations and expressions) at "
                 "line 1, column 13");
    const struct jinja_limits small = {.max_steps = 100};
    const char *loop = "{% for x in xs %}{{ x }}{% endfor %}";
    expect_limit(loop, strlen(loop),
                 "{\"xs\": [1, 2, 3, 4, 5, 6, 7, 8, 9, "
                 "10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, "
                 "24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, "
                 "38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50]}",
                 &small, "past max_steps (100 loop iterations");
    /* nested loops: each iteration counts */
    const char *nested = "{% for a in range(1000) %}{% for b in range(1000) "
                         "%}{% endfor %}{% endfor %}";
    expect_limit(nested, strlen(nested), NULL, NULL, "past max_steps");
    /* work on a large string is steps too: a loop cannot copy a
     * megabyte a million times */
    const char *copies = "{% set s = 'ab' * 500000 %}{% for i in range(100000) "
                         "%}{% set t = s.upper() %}{% endfor %}";
    expect_limit(copies, strlen(copies), NULL, NULL, "past max_steps");
    /* and within the limit, the same template renders */
    char *out;
    struct jinja_error err;
    assert_int_equal(
        render(loop, strlen(loop), "{\"xs\": [1, 2]}", &small, &out, &err),
        JINJA_OK);
    assert_string_equal(out, "12");
    free(out);
}

static void test_limit_output(void **state)
{
    (void)state;
    const struct jinja_limits small = {.max_output = 64};
    const char *src = "{% for i in range(100) %}xxxx{% endfor %}";
    expect_limit(src, strlen(src), NULL, &small,
                 "output past max_output (64 bytes) at line 1, column 26");
    const char *one = "{{ 'y' * 65 }}";
    expect_limit(one, strlen(one), NULL, &small, "output past max_output");
    /* exactly at the cap is allowed */
    const char *fits = "{{ 'y' * 64 }}";
    char *out;
    struct jinja_error err;
    assert_int_equal(render(fits, strlen(fits), NULL, &small, &out, &err),
                     JINJA_OK);
    assert_int_equal(strlen(out), 64);
    free(out);
}

static void test_limit_bytes(void **state)
{
    (void)state;
    /* a string doubled until it is past the cap stops there, before the
     * allocation */
    const char *doubling = "{% set ns = namespace(s='x') %}{% for i in "
                           "range(64) %}{% set ns.s = ns.s ~ ns.s %}"
                           "{% endfor %}{{ ns.s|length }}";
    expect_limit(doubling, strlen(doubling), NULL, NULL,
                 "values past max_bytes (16777216 bytes held at once)");
    const char *times = "{{ 'x' * 10**9 }}";
    expect_limit(times, strlen(times), NULL, NULL, "values past max_bytes");
    const char *lists = "{% set ns = namespace(l=[1]) %}{% for i in "
                        "range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}";
    const struct jinja_limits many_steps = {.max_steps = (size_t)1 << 30};
    expect_limit(lists, strlen(lists), NULL, &many_steps,
                 "values past max_bytes");
    const struct jinja_limits small = {.max_bytes = 4096};
    const char *join = "{{ range(1000)|join(',') }}";
    expect_limit(join, strlen(join), NULL, &small,
                 "values past max_bytes (4096 bytes");
    /* the context counts too */
    char ctx[8192];
    snprintf(ctx, sizeof ctx, "{\"s\": \"%05000d\"}", 0);
    expect_limit("{{ s }}", 7, ctx, &small, "values past max_bytes");
}

static void test_limit_depth(void **state)
{
    (void)state;
    const char *recurse = "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}";
    expect_limit(recurse, strlen(recurse), NULL, NULL,
                 "macro calls nested deeper than max_depth (64) at line 1, "
                 "column 19");
    const char *callers = "{% macro f() %}{% call f() %}x{% endcall %}"
                          "{% endmacro %}{{ f() }}";
    expect_limit(callers, strlen(callers), NULL, NULL,
                 "macro calls nested deeper than max_depth");
    const struct jinja_limits shallow = {.max_depth = 4};
    const char *nest = "{% set ns = namespace(x=[]) %}{% for i in range(10) %}"
                       "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}";
    expect_limit(nest, strlen(nest), NULL, &shallow,
                 "values nested deeper than max_depth (4)");
    expect_limit("{{ x }}", 7, "{\"x\": [[[[[[1]]]]]]}", &shallow,
                 "context nested deeper than max_depth (4)");
    /* an attribute chain compiles (no recursion in the parser) but a
     * render stops before C's stack runs out */
    const size_t links = 5000;
    char *chain = malloc(links * 2 + 16);
    assert_non_null(chain);
    size_t n = (size_t)sprintf(chain, "{{ x");
    for (size_t i = 0; i < links; i++)
        n += (size_t)sprintf(chain + n, ".a");
    n += (size_t)sprintf(chain + n, " }}");
    expect_limit(chain, n, NULL, NULL, "expressions nested deeper than");
    free(chain);
}

/* Nesting in the source is refused at compile, without recursing as
 * deep as it goes. */
static void test_limit_parse_depth(void **state)
{
    (void)state;
    static const char *const opens[] = {
        "(", "[", "{'a': ", "not ", "-", "{% if x %}", "1 if x else "};
    static const char *const closes[] = {")", "]",           "}", "",
                                         "",  "{% endif %}", ""};
    /* deep, and within the longest source a compile takes */
    const size_t deep = 40000;
    for (size_t k = 0; k < sizeof opens / sizeof opens[0]; k++) {
        const size_t lo = strlen(opens[k]), lc = strlen(closes[k]);
        char *src = malloc(deep * (lo + lc) + 16);
        assert_non_null(src);
        const bool stmt = opens[k][0] == '{' && opens[k][1] == '%';
        size_t n = 0;
        if (!stmt)
            n += (size_t)sprintf(src, "{{ ");
        for (size_t i = 0; i < deep; i++, n += lo)
            memcpy(src + n, opens[k], lo);
        n += (size_t)sprintf(src + n, "1");
        for (size_t i = 0; i < deep; i++, n += lc)
            memcpy(src + n, closes[k], lc);
        if (!stmt)
            n += (size_t)sprintf(src + n, " }}");
        struct jinja_error err;
        jinja_status st;
        struct jinja_template *t = jinja_compile(src, n, &st, &err);
        assert_null(t);
        assert_int_equal(st, JINJA_E_SYNTAX);
        if (!strstr(err.message, "nesting deeper than 200"))
            fail_msg("%s: %s", opens[k], err.message);
        free(src);
    }
}

/* Every table's template run into each limit at every point on its way
 * (each count of steps, each 32 bytes of values, each byte of output):
 * each stops with JINJA_E_LIMIT until the limit lets it finish, then
 * gives jinja2's render; the sanitizers' builds check that every one of
 * those stops freed what it had built. */
static void run_each_limit(const struct render_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        jinja_status st;
        struct jinja_error err;
        struct jinja_template *t =
            jinja_compile(cases[i].src, strlen(cases[i].src), &st, &err);
        assert_non_null(t);
        cJSON *vars = cases[i].ctx[0] ? cJSON_Parse(cases[i].ctx) : NULL;
        for (int which = 0; which < 3; which++) {
            for (size_t cap = 1;; cap += which == 1 ? 32 : 1) {
                struct jinja_limits limits = {0};
                if (which == 0)
                    limits.max_steps = cap;
                else if (which == 1)
                    limits.max_bytes = cap;
                else
                    limits.max_output = cap;
                char *out;
                size_t len;
                st = jinja_render(t, vars, &limits, NOW, &out, &len, &err);
                if (st == JINJA_E_LIMIT) {
                    assert_null(out);
                    continue;
                }
                if (st != JINJA_OK || strcmp(out, cases[i].want) != 0)
                    fail_msg("%s, limit %d at %zu: %d %s", cases[i].name, which,
                             cap, st, st ? err.message : out);
                free(out);
                break;
            }
        }
        cJSON_Delete(vars);
        jinja_free(t);
    }
}

static void test_limits_at_every_point(void **state)
{
    (void)state;
    run_each_limit(statements, sizeof statements / sizeof statements[0]);
    run_each_limit(scoping, sizeof scoping / sizeof scoping[0]);
    run_each_limit(filters, sizeof filters / sizeof filters[0]);
    run_each_limit(methods, sizeof methods / sizeof methods[0]);
    run_each_limit(tojson, sizeof tojson / sizeof tojson[0]);
    run_each_limit(undefined, sizeof undefined / sizeof undefined[0]);
}

/* A source past the longest accepted is refused before it is read. */
static void test_limit_source(void **state)
{
    (void)state;
    const size_t len = ((size_t)1 << 20) + 1;
    char *src = malloc(len);
    assert_non_null(src);
    memset(src, 'x', len);
    struct jinja_error err;
    jinja_status st;
    assert_null(jinja_compile(src, len, &st, &err));
    assert_int_equal(st, JINJA_E_SYNTAX);
    assert_string_equal(err.message,
                        "template of 1048577 bytes, longer than 1048576");
    /* one byte less is a template */
    struct jinja_template *t = jinja_compile(src, len - 1, &st, &err);
    assert_non_null(t);
    jinja_free(t);
    free(src);
}

/* ------------------------------------------------------- the contract */

/* The source is read by its length, not to a NUL; an empty template
 * renders nothing; no context is no variables. */
static void test_source_by_length(void **state)
{
    (void)state;
    char *out;
    struct jinja_error err;
    assert_int_equal(render("{{ 1 }}{{ 2 }}", 7, NULL, NULL, &out, &err),
                     JINJA_OK);
    assert_string_equal(out, "1");
    free(out);
    assert_int_equal(render("", 0, NULL, NULL, &out, &err), JINJA_OK);
    assert_string_equal(out, "");
    free(out);
    assert_int_equal(render("[{{ x }}]", 9, NULL, NULL, &out, &err), JINJA_OK);
    assert_string_equal(out, "[]");
    free(out);
    jinja_free(NULL);
}

struct shared {
    const struct jinja_template *t;
    const cJSON *ctx;
    const char *want;
    int failures;
};

static void *render_many(void *arg)
{
    struct shared *s = arg;
    for (int i = 0; i < 200; i++) {
        char *out;
        size_t len;
        struct jinja_error err;
        if (jinja_render(s->t, s->ctx, NULL, NOW, &out, &len, &err) !=
                JINJA_OK ||
            strcmp(out, s->want) != 0)
            __atomic_add_fetch(&s->failures, 1, __ATOMIC_RELAXED);
        free(out);
    }
    return NULL;
}

/* One compiled template, rendered by several threads at once. */
static void test_concurrent_renders(void **state)
{
    (void)state;
    const char *src =
        "{%- set ns = namespace(n=0) %}{% macro m(x) %}<{{ x|upper }}>"
        "{% endmacro %}{% for msg in messages %}{% set ns.n = ns.n + 1 %}"
        "{{ m(msg.role) }}{{ msg.content|tojson }}{% endfor %}{{ ns.n }}";
    jinja_status st;
    struct jinja_error err;
    struct jinja_template *t = jinja_compile(src, strlen(src), &st, &err);
    assert_non_null(t);
    cJSON *ctx = cJSON_Parse("{\"messages\": [{\"role\": \"user\", "
                             "\"content\": \"h\\u00e9\"}, {\"role\": "
                             "\"assistant\", \"content\": \"x\"}]}");
    assert_non_null(ctx);
    /* jinja2's render of it */
    struct shared s = {
        .t = t, .ctx = ctx, .want = "<USER>\"h\xc3\xa9\"<ASSISTANT>\"x\"2"};
    pthread_t threads[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, render_many, &s), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(threads[i], NULL);
    assert_int_equal(s.failures, 0);
    cJSON_Delete(ctx);
    jinja_free(t);
}

int main(void)
{
    const struct CMUnitTest all[] = {
        cmocka_unit_test(test_statements),
        cmocka_unit_test(test_whitespace),
        cmocka_unit_test(test_scoping),
        cmocka_unit_test(test_expressions),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_undefined),
        cmocka_unit_test(test_methods),
        cmocka_unit_test(test_filters),
        cmocka_unit_test(test_test_kinds),
        cmocka_unit_test(test_tojson),
        cmocka_unit_test(test_globals),
        cmocka_unit_test(test_compile_errors),
        cmocka_unit_test(test_runtime_errors),
        cmocka_unit_test(test_limit_steps),
        cmocka_unit_test(test_limit_output),
        cmocka_unit_test(test_limit_bytes),
        cmocka_unit_test(test_limit_depth),
        cmocka_unit_test(test_limit_parse_depth),
        cmocka_unit_test(test_limit_source),
        cmocka_unit_test(test_limits_at_every_point),
        cmocka_unit_test(test_source_by_length),
        cmocka_unit_test(test_concurrent_renders),
    };
    /* strftime_now() formats the clock in local time: UTC here */
    setenv("TZ", "UTC", 1);
    tzset();
    return cmocka_run_group_tests(all, NULL, NULL);
}

/*
 * jinja_utf8.c - strings as Python sees them: code points decoded from
 * UTF-8 (a byte that starts no well-formed sequence counts as one code
 * point, so every byte string has a length and slices), Python's
 * whitespace, its case mapping for the scripts chat templates meet
 * (ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic) and
 * str.isprintable().
 */
#include "jinja_internal.h"

uint32_t jinja_utf8_next(const char *s, size_t len, size_t i, size_t *n)
{
    const unsigned char *p = (const unsigned char *)s + i;
    const size_t left = len - i;
    const unsigned b = p[0];
    *n = 1;
    if (b < 0x80)
        return b;
    size_t need;
    uint32_t cp, min;
    if (b >= 0xc2 && b <= 0xdf) {
        need = 1;
        cp = b & 0x1f;
        min = 0x80;
    } else if (b >= 0xe0 && b <= 0xef) {
        need = 2;
        cp = b & 0x0f;
        min = 0x800;
    } else if (b >= 0xf0 && b <= 0xf4) {
        need = 3;
        cp = b & 0x07;
        min = 0x10000;
    } else {
        return b;
    }
    if (left <= need)
        return b;
    for (size_t k = 1; k <= need; k++) {
        if ((p[k] & 0xc0) != 0x80)
            return b;
        cp = cp << 6 | (p[k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return b;
    *n = need + 1;
    return cp;
}

size_t jinja_utf8_put(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

size_t jinja_utf8_count(const char *s, size_t len)
{
    size_t count = 0;
    for (size_t i = 0; i < len; count++) {
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        size_t n;
        jinja_utf8_next(s, len, i, &n);
        i += n;
    }
    return count;
}

size_t jinja_utf8_offset(const char *s, size_t len, size_t k)
{
    size_t i = 0;
    while (k-- > 0 && i < len) {
        size_t n;
        jinja_utf8_next(s, len, i, &n);
        i += n;
    }
    return i;
}

bool jinja_is_space(uint32_t cp)
{
    if (cp < 0x80)
        return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20);
    return cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

size_t jinja_space_after(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        size_t n;
        if (!jinja_is_space(jinja_utf8_next(s, len, i, &n)))
            break;
        i += n;
    }
    return i;
}

size_t jinja_utf8_prev(const char *s, size_t end)
{
    size_t i = end - 1;
    /* a well-formed sequence is at most 4 bytes; step back over
     * continuation bytes and check the lead decodes to end */
    for (size_t back = 1; back <= 4 && back <= end; back++) {
        const size_t at = end - back;
        if (((unsigned char)s[at] & 0xc0) != 0x80) {
            size_t n;
            jinja_utf8_next(s, end, at, &n);
            if (at + n == end)
                return at;
            break;
        }
    }
    return i;
}

size_t jinja_space_before(const char *s, size_t len)
{
    size_t end = len;
    while (end > 0) {
        const size_t at = jinja_utf8_prev(s, end);
        size_t n;
        if (!jinja_is_space(jinja_utf8_next(s, end, at, &n)))
            break;
        end = at;
    }
    return len - end;
}

/* ------------------------------------------------------------- case */

uint32_t jinja_upper(uint32_t cp)
{
    if (cp < 0x80)
        return cp >= 'a' && cp <= 'z' ? cp - 32 : cp;
    if (cp == 0xb5)
        return 0x39c;
    if ((cp >= 0xe0 && cp <= 0xfe && cp != 0xf7))
        return cp - 32;
    if (cp == 0xff)
        return 0x178;
    if (cp >= 0x100 && cp <= 0x17f) {
        if (cp == 0x131)
            return 'I';
        if (cp == 0x17f)
            return 'S';
        if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17e))
            return (cp & 1) ? cp : cp - 1;
        if (cp == 0x130 || cp == 0x138 || cp == 0x149 || cp == 0x178)
            return cp;
        return (cp & 1) ? cp - 1 : cp;
    }
    if (cp >= 0x3b1 && cp <= 0x3c9 && cp != 0x3c2)
        return cp - 32;
    if (cp == 0x3c2)
        return 0x3a3;
    if (cp >= 0x3ac && cp <= 0x3af) {
        static const uint16_t tonos[] = {0x386, 0x388, 0x389, 0x38a};
        return tonos[cp - 0x3ac];
    }
    if (cp == 0x3cc)
        return 0x38c;
    if (cp == 0x3cd || cp == 0x3ce)
        return cp - 0x3f;
    if (cp >= 0x430 && cp <= 0x44f)
        return cp - 32;
    if (cp >= 0x450 && cp <= 0x45f)
        return cp - 80;
    return cp;
}

uint32_t jinja_lower(uint32_t cp)
{
    if (cp < 0x80)
        return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    if (cp >= 0xc0 && cp <= 0xde && cp != 0xd7)
        return cp + 32;
    if (cp == 0x178)
        return 0xff;
    if (cp >= 0x100 && cp <= 0x17f) {
        if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17e))
            return (cp & 1) ? cp + 1 : cp;
        if (cp == 0x130 || cp == 0x131 || cp == 0x138 || cp == 0x149 ||
            cp == 0x17f)
            return cp;
        return (cp & 1) ? cp : cp + 1;
    }
    if (cp >= 0x391 && cp <= 0x3a9 && cp != 0x3a2)
        return cp + 32;
    if (cp == 0x386)
        return 0x3ac;
    if (cp >= 0x388 && cp <= 0x38a)
        return cp + 37;
    if (cp == 0x38c)
        return 0x3cc;
    if (cp == 0x38e || cp == 0x38f)
        return cp + 0x3f;
    if (cp >= 0x410 && cp <= 0x42f)
        return cp + 32;
    if (cp >= 0x400 && cp <= 0x40f)
        return cp + 80;
    return cp;
}

bool jinja_is_cased_upper(uint32_t cp)
{
    return jinja_lower(cp) != cp || cp == 0x130;
}

bool jinja_is_cased_lower(uint32_t cp)
{
    return jinja_upper(cp) != cp || cp == 0xdf || cp == 0x138 || cp == 0x149;
}

/* ---------------------------------------------------------- printable */

/* Code points Python's repr() escapes beyond ASCII: the C1 controls,
 * separators other than space, format characters, private use and
 * non-characters (unassigned ones are not tabulated). */
bool jinja_is_printable(uint32_t cp)
{
    static const uint32_t ranges[][2] = {
        {0x80, 0xa0},       {0xad, 0xad},       {0x600, 0x605},
        {0x61c, 0x61c},     {0x6dd, 0x6dd},     {0x70f, 0x70f},
        {0x890, 0x891},     {0x8e2, 0x8e2},     {0x1680, 0x1680},
        {0x180e, 0x180e},   {0x2000, 0x200f},   {0x2028, 0x202f},
        {0x205f, 0x2064},   {0x2066, 0x206f},   {0x3000, 0x3000},
        {0xd800, 0xf8ff},   {0xfeff, 0xfeff},   {0xfff0, 0xfffb},
        {0xfffe, 0xffff},   {0x110bd, 0x110bd}, {0x110cd, 0x110cd},
        {0x13430, 0x1343f}, {0x1bca0, 0x1bca3}, {0x1d173, 0x1d17a},
        {0xe0000, 0xe0fff}, {0xf0000, 0x10ffff}};
    if (cp < 0x80)
        return cp >= 0x20 && cp < 0x7f;
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
        if (cp >= ranges[i][0] && cp <= ranges[i][1])
            return false;
    return true;
}

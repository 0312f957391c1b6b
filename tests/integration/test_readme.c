/*
 * test_readme.c - every curl example of README.md and of each docs/NAME.md,
 * run as written against a real server (only the address changes), so
 * the documentation cannot drift from the service. An example followed by
 * a complete JSON block must print exactly that JSON. The server has
 * tests/models/f32 loaded as "bert", for the examples of docs/models.md.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* the address every example is written with */
#define DOCS_URL "http://127.0.0.1:8080"

struct example {
    char *command;  /* continuation lines joined */
    char *expected; /* the JSON block right after, if complete; else NULL */
};

/* Replace every DOCS_URL in s with url; the caller frees the result. */
static char *with_url(const char *s, const char *url)
{
    const size_t from = strlen(DOCS_URL), to = strlen(url);
    char *out = malloc(strlen(s) * (to / from + 2) + 1);
    size_t n = 0;
    while (*s) {
        if (!strncmp(s, DOCS_URL, from)) {
            memcpy(out + n, url, to);
            n += to;
            s += from;
        } else {
            out[n++] = *s++;
        }
    }
    out[n] = '\0';
    return out;
}

/* The curl commands of the ```sh blocks, in order. */
static size_t find_examples(const char *doc, struct example *out, size_t cap)
{
    size_t n = 0;
    const char *p = doc;
    while ((p = strstr(p, "```sh\n")) && n < cap) {
        p += 6;
        const char *end = strstr(p, "```");
        if (!end)
            break;
        const char *line = p;
        while (line < end) {
            if (strncmp(line, "curl ", 5)) {
                line = strchr(line, '\n') + 1;
                continue;
            }
            /* join "\" continuations and lines inside a quoted string */
            size_t len = 0;
            char *cmd = malloc((size_t)(end - line) + 1);
            char quote = 0;
            while (line < end) {
                const char *nl = strchr(line, '\n');
                const size_t k = (size_t)(nl - line);
                for (size_t c = 0; c < k; c++)
                    if (line[c] == '\'' || line[c] == '"')
                        quote = !quote ? line[c] : quote == line[c] ? 0 : quote;
                const int more = k > 0 && line[k - 1] == '\\';
                memcpy(cmd + len, line, more ? k - 1 : k);
                len += more ? k - 1 : k;
                line = nl + 1;
                if (quote)
                    cmd[len++] = '\n';
                else if (!more)
                    break;
            }
            cmd[len] = '\0';
            out[n].command = cmd;
            out[n].expected = NULL;
            n++;
        }
        p = end + 3;
        /* a complete JSON answer right after a block with one command */
        const char *next = p;
        while (*next == '\n')
            next++;
        if (n && !strncmp(next, "```json\n", 8)) {
            const char *jend = strstr(next + 8, "```");
            if (jend) {
                const size_t jl = (size_t)(jend - next - 8);
                char *json = malloc(jl + 1);
                memcpy(json, next + 8, jl);
                json[jl] = '\0';
                if (!strstr(json, "..."))
                    out[n - 1].expected = json;
                else
                    free(json);
            }
        }
    }
    return n;
}

/* Run the examples of the file at path; returns how many there were. */
static size_t run_examples(const char *path, const char *url, const char *dir)
{
    char *doc = read_file(path, NULL);
    if (!doc)
        fail_msg("cannot read %s", path);
    struct example ex[64];
    const size_t n = find_examples(doc, ex, 64);
    for (size_t i = 0; i < n; i++) {
        char *cmd = with_url(ex[i].command, url);
        const size_t full_len = strlen(cmd) + strlen(dir) + 32;
        char *full = malloc(full_len);
        snprintf(full, full_len, "cd %s && %s", dir, cmd);
        FILE *fp = popen(full, "r");
        assert_non_null(fp);
        char out[1 << 16];
        const size_t got = fread(out, 1, sizeof out - 1, fp);
        out[got] = '\0';
        const int status = pclose(fp);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("%s example failed (%d): %s", path, status, ex[i].command);
        const char *o = strstr(cmd, " -o ");
        if (o) { /* the named file must hold an answer */
            char file[256];
            snprintf(file, sizeof file, "%s/%.*s", dir,
                     (int)strcspn(o + 4, " "), o + 4);
            size_t len = 0;
            char *data = read_file(file, &len);
            if (!data || len == 0)
                fail_msg("%s example wrote nothing to %s: %s", path, file,
                         ex[i].command);
            free(data);
            remove(file);
        } else if (got == 0) {
            fail_msg("%s example printed nothing: %s", path, ex[i].command);
        }
        if (ex[i].expected) {
            const size_t el = strlen(ex[i].expected);
            const size_t ol = strlen(out);
            if (strncmp(out, ex[i].expected, el - 1) ||
                (ol != el - 1 && ol != el))
                fail_msg("%s example printed\n%s\nbut %s shows\n%s", path, out,
                         path, ex[i].expected);
        }
        free(full);
        free(cmd);
        free(ex[i].command);
        free(ex[i].expected);
    }
    free(doc);
    return n;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* README.md, then each docs/NAME.md in name order; the caller frees each
 * name and the array. */
static size_t doc_files(char ***out)
{
    size_t n = 0, cap = 16;
    char **files = malloc(cap * sizeof *files);
    files[n++] = strdup("README.md");
    DIR *d = opendir("docs");
    assert_non_null(d);
    const struct dirent *e;
    while ((e = readdir(d))) {
        const size_t len = strlen(e->d_name);
        if (len < 4 || e->d_name[0] == '.' ||
            strcmp(e->d_name + len - 3, ".md"))
            continue;
        if (n == cap)
            files = realloc(files, (cap *= 2) * sizeof *files);
        files[n] = malloc(len + 6);
        snprintf(files[n++], len + 6, "docs/%s", e->d_name);
    }
    closedir(d);
    qsort(files + 1, n - 1, sizeof *files, by_name);
    *out = files;
    return n;
}

static void test_readme_examples(void **state)
{
    (void)state;
    char **files;
    const size_t n_files = doc_files(&files);
    assert_true(n_files > 1);
    struct server s;
    assert_true(server_start(
        &s, (const char *const[]){"--model", "bert=tests/models/f32", "--model",
                                  "llama=tests/models/llama3", NULL}));
    char url[64], dir[] = "/tmp/attnd-readme-XXXXXX";
    snprintf(url, sizeof url, "http://127.0.0.1:%u", s.port);
    assert_non_null(mkdtemp(dir));
    size_t n = 0;
    for (size_t f = 0; f < n_files; f++) {
        n += run_examples(files[f], url, dir);
        free(files[f]);
    }
    free(files);
    assert_true(n >= 8);
    rmdir(dir);
    assert_int_equal(server_stop(&s, 10.0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readme_examples),
    };
    return cmocka_run_group_tests_name("readme", tests, NULL, NULL);
}

/*
 * test_svg.c - SVG answers against the real binary, each parsed by
 * libxml2: the PNG's size, the labels as text, cells in the colours of
 * the weights, the texts in <metadata>, token text escaped, content
 * negotiation, caching headers, and the SVG's size cap before computing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "decoded_png.h"
#include "harness.h"

#include <cjson/cJSON.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct server srv;

static int setup(void **state)
{
    (void)state;
    const char *args[] = {"--model", "llama=tests/models/llama3", NULL};
    return server_start(&srv, args) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return server_stop(&srv, 10.0) == 0 ? 0 : -1;
}

static void get(const char *path, const char *const *headers, struct reply *r)
{
    assert_true(http_call(&srv, "GET", path, NULL, 0, headers, r));
    if (r->status != 200)
        fail_msg("%s: %ld %.300s", path, r->status, r->body);
}

/* The body parsed as XML (no network, no entities loaded); the test fails
 * when it is not well-formed or its root is not an SVG of the PNG's
 * width and height (when given). */
static xmlDocPtr parse_svg(const struct reply *r, unsigned width,
                           unsigned height)
{
    assert_string_equal(r->content_type, "image/svg+xml");
    xmlDocPtr doc =
        xmlReadMemory(r->body, (int)r->len, "answer.svg", "UTF-8",
                      XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_HUGE);
    if (!doc)
        fail_msg("not well-formed XML: %.200s", r->body);
    xmlNodePtr root = xmlDocGetRootElement(doc);
    assert_string_equal((const char *)root->name, "svg");
    assert_string_equal((const char *)root->ns->href,
                        "http://www.w3.org/2000/svg");
    if (width) {
        xmlChar *w = xmlGetProp(root, (const xmlChar *)"width");
        xmlChar *h = xmlGetProp(root, (const xmlChar *)"height");
        assert_int_equal(strtoul((const char *)w, NULL, 10), width);
        assert_int_equal(strtoul((const char *)h, NULL, 10), height);
        xmlFree(w);
        xmlFree(h);
    }
    return doc;
}

static int prop_int(xmlNodePtr n, const char *name)
{
    xmlChar *v = xmlGetProp(n, (const xmlChar *)name);
    const int i = v ? atoi((const char *)v) : -1;
    xmlFree(v);
    return i;
}

/* Every <text>'s content joined by '\n', and the <chunk key=...> text. */
static void collect(xmlNodePtr n, char *texts, size_t cap, const char *key,
                    char **chunk)
{
    for (; n; n = n->next) {
        if (n->type != XML_ELEMENT_NODE)
            continue;
        if (!strcmp((const char *)n->name, "text")) {
            xmlChar *c = xmlNodeGetContent(n);
            strncat(texts, (const char *)c, cap - strlen(texts) - 2);
            strncat(texts, "\n", cap - strlen(texts) - 1);
            xmlFree(c);
        } else if (!strcmp((const char *)n->name, "chunk") && key) {
            xmlChar *k = xmlGetProp(n, (const xmlChar *)"key");
            if (k && !strcmp((const char *)k, key) && !*chunk)
                *chunk = (char *)xmlNodeGetContent(n);
            xmlFree(k);
        }
        collect(n->children, texts, cap, key, chunk);
    }
}

/* The same request as PNG and as SVG: the same size, the tokens as text,
 * the texts in <metadata>. */
static void test_svg_matches_png(void **state)
{
    (void)state;
    struct reply p, s;
    get("/attention?sentence=the+cat+sat+on+the+mat&format=png&head=all", NULL,
        &p);
    struct decoded_png img;
    decoded_png_read(&p, &img);
    get("/attention?sentence=the+cat+sat+on+the+mat&format=svg&head=all", NULL,
        &s);
    xmlDocPtr doc = parse_svg(&s, img.width, img.height);
    static char texts[1 << 16];
    texts[0] = '\0';
    char *tokens = NULL;
    collect(xmlDocGetRootElement(doc), texts, sizeof texts, "attnd:tokens",
            &tokens);
    assert_non_null(strstr(texts, "\ncat\n"));
    assert_non_null(strstr(texts, "\nmat\n"));
    assert_non_null(strstr(texts, "head 0 of 8"));
    assert_non_null(tokens);
    assert_string_equal(tokens, decoded_png_text(&img, "attnd:tokens"));
    xmlFree(tokens);
    xmlFreeDoc(doc);
    /* a GET's SVG is cached as the PNG is, under a tag of its own */
    char etag_p[64], etag_s[64], cache[64];
    assert_true(reply_header(&p, "ETag", etag_p, sizeof etag_p));
    assert_true(reply_header(&s, "ETag", etag_s, sizeof etag_s));
    assert_string_not_equal(etag_p, etag_s);
    assert_true(reply_header(&s, "Cache-Control", cache, sizeof cache));
    assert_non_null(strstr(cache, "max-age"));
    decoded_png_free(&img);
    reply_free(&p);
    reply_free(&s);
}

/* Bare cells (labels=false, gray): each rectangle's grey is the level of
 * every weight it covers, round(w / max * 255) within one level. */
static void test_svg_cells_are_the_weights(void **state)
{
    (void)state;
    struct reply j, s;
    get("/attention?sentence=one+two+three+four+five&heads=1", NULL, &j);
    cJSON *root = cJSON_ParseWithLength(j.body, j.len);
    const cJSON *m =
        cJSON_GetArrayItem(cJSON_GetObjectItem(root, "weights"), 0);
    const int n = cJSON_GetArraySize(m);
    double w[5][5], top = 0;
    for (int r = 0; r < n; r++)
        for (int c = 0; c < n; c++) {
            w[r][c] =
                cJSON_GetArrayItem(cJSON_GetArrayItem(m, r), c)->valuedouble;
            top = w[r][c] > top ? w[r][c] : top;
        }
    get("/attention?sentence=one+two+three+four+five&heads=1&format=svg&"
        "labels=false&colormap=gray&cell=10",
        NULL, &s);
    xmlDocPtr doc = parse_svg(&s, 50, 50);
    int covered = 0;
    for (xmlNodePtr e = xmlDocGetRootElement(doc)->children; e; e = e->next) {
        if (e->type != XML_ELEMENT_NODE ||
            strcmp((const char *)e->name, "rect"))
            continue;
        const int x = prop_int(e, "x"), y = prop_int(e, "y");
        const int wd = prop_int(e, "width"), ht = prop_int(e, "height");
        if (wd == 50 && ht == 50)
            continue; /* the background */
        xmlChar *fill = xmlGetProp(e, (const xmlChar *)"fill");
        const unsigned grey =
            (unsigned)strtoul((const char *)fill + 1, NULL, 16) & 0xff;
        xmlFree(fill);
        assert_int_equal(ht, 10);
        for (int c = x / 10; c < (x + wd) / 10; c++) {
            const double want = w[y / 10][c] / top * 255.0;
            if (grey + 1.01 < want || grey > want + 1.01)
                fail_msg("cell (%d, %d): grey %u, weight gives %.2f", y / 10, c,
                         grey, want);
            covered++;
        }
    }
    assert_int_equal(covered, n * n);
    xmlFreeDoc(doc);
    cJSON_Delete(root);
    reply_free(&j);
    reply_free(&s);
}

/* Accept chooses as for PNG; format= in the URL decides over it. */
static void test_svg_negotiation(void **state)
{
    (void)state;
    const char *svg[] = {"Accept: image/svg+xml", NULL};
    const char *both[] = {"Accept: image/png, image/svg+xml", NULL};
    struct reply r;
    get("/attention?sentence=a+b", svg, &r);
    xmlFreeDoc(parse_svg(&r, 0, 0));
    reply_free(&r);
    get("/attention?sentence=a+b", both, &r);
    assert_string_equal(r.content_type, "image/png");
    reply_free(&r);
    get("/attention?sentence=a+b&format=json", svg, &r);
    assert_string_equal(r.content_type, "application/json");
    reply_free(&r);
    get("/attention?sentence=a+b&format=png", svg, &r);
    assert_string_equal(r.content_type, "image/png");
    reply_free(&r);
    assert_true(http_call(&srv, "GET", "/attention?sentence=a+b&format=gif",
                          NULL, 0, NULL, &r));
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "svg"));
    reply_free(&r);
}

/* Token text that is markup is escaped: the document still parses and its
 * text holds the characters themselves. */
static void test_svg_escapes_tokens(void **state)
{
    (void)state;
    struct reply r;
    get("/attention?sentence=%3Cb%3E+%26amp%3B+%22q%22+%27s%27&format=svg",
        NULL, &r);
    xmlDocPtr doc = parse_svg(&r, 0, 0);
    static char texts[1 << 16];
    texts[0] = '\0';
    char *none = NULL;
    collect(xmlDocGetRootElement(doc), texts, sizeof texts, NULL, &none);
    assert_non_null(strstr(texts, "\n<\n"));
    assert_non_null(strstr(texts, "\n&\n"));
    assert_non_null(strstr(texts, "\n\"\n"));
    xmlFreeDoc(doc);
    reply_free(&r);
}

/* A decoder's views, pooled: every one parses; a pooled one says so in
 * its metadata and labels blocks ("0-2 ..."), fewer than the tokens. */
static void test_svg_model_views(void **state)
{
    (void)state;
    const char *paths[] = {
        "/attention?model=llama&sentence=the+cat+sat&format=svg&view=model",
        "/attention?model=llama&sentence=the+cat+sat&format=svg&view=rollout",
        "/attention?model=llama&sentence=the+cat+sat&format=svg&layer=1",
        "/attention?model=llama&sentence=the+cat+sat+on+the+mat+and+the+dog+"
        "sat+on+the+log&format=svg&layer=0&head=1&pool=mean&pool_size=3",
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        struct reply p, s;
        char png_path[512];
        snprintf(png_path, sizeof png_path, "%s", paths[i]);
        memcpy(strstr(png_path, "format=svg") + 7, "png", 3);
        get(png_path, NULL, &p);
        struct decoded_png img;
        decoded_png_read(&p, &img);
        get(paths[i], NULL, &s);
        xmlDocPtr doc = parse_svg(&s, img.width, img.height);
        static char texts[1 << 16];
        texts[0] = '\0';
        char *pool = NULL;
        collect(xmlDocGetRootElement(doc), texts, sizeof texts, "attnd:pool",
                &pool);
        assert_non_null(pool);
        assert_string_equal(pool, decoded_png_text(&img, "attnd:pool"));
        assert_non_null(strstr(s.body, "url(#na")); /* causal: hatched */
        if (strcmp(pool, "none")) {
            assert_non_null(strstr(texts, "\n0-2 "));
            assert_non_null(strstr(texts, "pooled: each cell the mean"));
        }
        xmlFree(pool);
        xmlFreeDoc(doc);
        decoded_png_free(&img);
        reply_free(&p);
        reply_free(&s);
    }
}

/* An SVG that could pass 64 MiB is refused at /format, naming its bound
 * and the cap, before anything is computed. */
static void test_svg_too_big(void **state)
{
    (void)state;
    double before = -1, after = -1;
    assert_true(
        metric_read(&srv, "127.0.0.1", "attnd_attention_flops_total", &before));
    char *body = sentence_body(1500, "\"heads\":1");
    struct reply r;
    assert_true(post_json(&srv, "/attention?format=svg&pool=none", body, &r));
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "\"pointer\":\"/format\""));
    assert_non_null(strstr(r.body, "MiB"));
    assert_non_null(strstr(r.body, "64 MiB"));
    reply_free(&r);
    assert_true(
        metric_read(&srv, "127.0.0.1", "attnd_attention_flops_total", &after));
    assert_true(after == before);
    /* pooled, the same input fits */
    assert_true(post_json(&srv, "/attention?format=svg", body, &r));
    assert_int_equal(r.status, 200);
    xmlFreeDoc(parse_svg(&r, 0, 0));
    reply_free(&r);
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_svg_matches_png),
        cmocka_unit_test(test_svg_cells_are_the_weights),
        cmocka_unit_test(test_svg_negotiation),
        cmocka_unit_test(test_svg_escapes_tokens),
        cmocka_unit_test(test_svg_model_views),
        cmocka_unit_test(test_svg_too_big),
    };
    const int failed = cmocka_run_group_tests(tests, setup, teardown);
    xmlCleanupParser();
    return failed;
}

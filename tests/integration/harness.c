/*
 * harness.c - the real server as a child process, reached over loopback.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double clock_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void pause_ms(long ms)
{
    nanosleep(&(struct timespec){.tv_sec = ms / 1000,
                                 .tv_nsec = (ms % 1000) * 1000000L},
              NULL);
}

char *read_file(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    fseek(fp, 0, SEEK_END);
    const long size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *data = malloc((size_t)size + 1);
    if (data && fread(data, 1, (size_t)size, fp) != (size_t)size) {
        free(data);
        data = NULL;
    }
    fclose(fp);
    if (data) {
        data[size] = '\0';
        if (len)
            *len = (size_t)size;
    }
    return data;
}

/* The port from the "serving http://host:port/" line of the log. */
static unsigned port_from_log(const char *path)
{
    char *log = read_file(path, NULL);
    unsigned port = 0;
    if (log) {
        const char *at = strstr(log, "serving http://");
        const char *colon = at ? strchr(at + 15, ':') : NULL;
        if (colon)
            port = (unsigned)strtoul(colon + 1, NULL, 10);
        free(log);
    }
    return port;
}

enum { START_SECONDS = 60 };

bool server_start(struct server *s, const char *const *extra_args)
{
    return server_start_capped(s, extra_args, 0);
}

/* The servers' logs, read by the tests after a stop and removed when the
 * test program ends. */
static int logs_written;

static void remove_logs(void)
{
    for (int i = 0; i < logs_written; i++) {
        char path[256];
        snprintf(path, sizeof path, "/tmp/attnd-test-%d-%d.log", (int)getpid(),
                 i);
        unlink(path);
    }
}

bool server_start_capped(struct server *s, const char *const *extra_args,
                         size_t address_space)
{
    static int serial;
    if (serial == 0)
        atexit(remove_logs);
    logs_written = serial + 1;
    memset(s, 0, sizeof *s);
    s->start_exit = -1;
    const char *bin = getenv("ATTND_BIN") ? getenv("ATTND_BIN") : "build/attnd";
    snprintf(s->log_path, sizeof s->log_path, "/tmp/attnd-test-%d-%d.log",
             (int)getpid(), serial++);
    const char *argv[64] = {bin,         "--port",    "0", "--bind",
                            "127.0.0.1", "--threads", "2"};
    int argc = 7;
    bool web_given = false;
    for (int i = 0; extra_args && extra_args[i] && argc < 62; i++) {
        web_given = web_given || !strcmp(extra_args[i], "--web-root");
        argv[argc++] = extra_args[i];
    }
    if (!web_given) {
        argv[argc++] = "--web-root";
        argv[argc++] = "web";
    }
    argv[argc] = NULL;
    s->pid = fork();
    if (s->pid < 0)
        return false;
    if (s->pid == 0) {
        /* a test that fails midway longjmps past server_stop(): the server
         * must not outlive it */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (address_space) {
            const struct rlimit cap = {address_space, address_space};
            setrlimit(RLIMIT_AS, &cap);
        }
        FILE *log = freopen(s->log_path, "w", stderr);
        if (log)
            dup2(fileno(log), STDOUT_FILENO);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    /* a generous wait: a checkpoint of bert-base's size is read and
     * checked before the port opens, which on a busy shared machine has
     * taken over ten seconds */
    const double deadline = clock_seconds() + START_SECONDS;
    while (clock_seconds() < deadline) {
        int status;
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            s->pid = 0;
            if (WIFEXITED(status))
                s->start_exit = WEXITSTATUS(status);
            return false; /* exited during start-up */
        }
        if (!s->port)
            s->port = port_from_log(s->log_path);
        if (s->port) {
            struct reply r;
            if (http_call(s, "GET", "/healthz", NULL, 0, NULL, &r)) {
                const bool up = r.status == 200;
                reply_free(&r);
                if (up)
                    return true;
            }
        }
        pause_ms(20);
    }
    char *log = read_file(s->log_path, NULL);
    fprintf(stderr,
            "server_start: %s was not serving after %d s; its log:\n%s\n", bin,
            START_SECONDS, log ? log : "(none)");
    free(log);
    server_stop(s, 1.0);
    return false;
}

int server_stop(struct server *s, double timeout_seconds)
{
    if (s->pid <= 0)
        return -1;
    kill(s->pid, SIGTERM);
    const double deadline = clock_seconds() + timeout_seconds;
    int status = 0;
    while (clock_seconds() < deadline) {
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            s->pid = 0;
            return WIFEXITED(status) ? WEXITSTATUS(status)
                                     : 128 + WTERMSIG(status);
        }
        pause_ms(10);
    }
    kill(s->pid, SIGKILL); /* only our own child, and only if it hangs */
    waitpid(s->pid, &status, 0);
    s->pid = 0;
    return -1;
}

struct sink {
    char *data;
    size_t len, cap;
};

/* Grown by doubling: a 24 MB answer arrives in thousands of pieces, and
 * growing by each would copy it thousands of times (slow enough under
 * AddressSanitizer, whose realloc always copies, to miss the timeout). */
static size_t on_body(char *p, size_t size, size_t n, void *cls)
{
    struct sink *k = cls;
    const size_t add = size * n;
    if (k->len + add + 1 > k->cap) {
        size_t cap = k->cap ? k->cap : 4096;
        while (cap < k->len + add + 1)
            cap *= 2;
        char *grown = realloc(k->data, cap);
        if (!grown)
            return 0;
        k->data = grown;
        k->cap = cap;
    }
    memcpy(k->data + k->len, p, add);
    k->len += add;
    k->data[k->len] = '\0';
    return add;
}

static size_t on_header(char *p, size_t size, size_t n, void *cls)
{
    struct reply *r = cls;
    const size_t add = size * n, used = strlen(r->headers);
    if (used + add + 1 < sizeof r->headers) {
        memcpy(r->headers + used, p, add);
        r->headers[used + add] = '\0';
    }
    return add;
}

bool http_call(const struct server *s, const char *method, const char *path,
               const char *body, size_t body_len, const char *const *headers,
               struct reply *out)
{
    memset(out, 0, sizeof *out);
    CURL *curl = curl_easy_init();
    if (!curl)
        return false;
    char url[2048];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", s->port, path);
    struct sink sink = {calloc(1, 1), 0, 1};
    struct curl_slist *list = NULL;
    for (int i = 0; headers && headers[i]; i++)
        list = curl_slist_append(list, headers[i]);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    if (!strcmp(method, "HEAD"))
        curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    if (body) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)body_len);
    }
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, out);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_PATH_AS_IS, 1L); /* send "/../" as is */
    const CURLcode rc = curl_easy_perform(curl);
    if (rc == CURLE_OK) {
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &out->status);
        char *type = NULL;
        curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &type);
        snprintf(out->content_type, sizeof out->content_type, "%s",
                 type ? type : "");
        out->body = sink.data;
        out->len = sink.len;
    } else {
        free(sink.data);
    }
    curl_slist_free_all(list);
    curl_easy_cleanup(curl);
    return rc == CURLE_OK;
}

void reply_free(struct reply *r)
{
    free(r->body);
    r->body = NULL;
}

bool reply_header(const struct reply *r, const char *name, char *out,
                  size_t len)
{
    const size_t n = strlen(name);
    for (const char *line = r->headers; line && *line;) {
        if (!strncasecmp(line, name, n) && line[n] == ':') {
            const char *v = line + n + 1;
            while (*v == ' ')
                v++;
            size_t k = 0;
            while (v[k] && v[k] != '\r' && v[k] != '\n' && k + 1 < len) {
                out[k] = v[k];
                k++;
            }
            out[k] = '\0';
            return true;
        }
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    return false;
}

void *post_call_run(void *arg)
{
    struct post_call *c = arg;
    c->ok = post_json(c->s, "/attention", c->body, &c->r);
    return NULL;
}

bool post_json(const struct server *s, const char *path, const char *json,
               struct reply *out)
{
    const char *headers[] = {"Content-Type: application/json", NULL};
    return http_call(s, "POST", path, json, strlen(json), headers, out);
}

/* A connection to the server from the loopback address `from`
 * ("127.0.0.1", "127.0.0.2", ...); -1 on failure. */
int raw_connect(const struct server *s, const char *from)
{
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in me = {.sin_family = AF_INET};
    inet_pton(AF_INET, from, &me.sin_addr);
    struct sockaddr_in to = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)s->port)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (bind(fd, (struct sockaddr *)&me, sizeof me) ||
        connect(fd, (struct sockaddr *)&to, sizeof to)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Send request on fd and read what comes back within ms milliseconds,
 * until the peer closes or out is full. Returns the bytes read. */
size_t raw_exchange(int fd, const char *request, char *out, size_t cap, int ms)
{
    if (request && send(fd, request, strlen(request), MSG_NOSIGNAL) < 0)
        return 0;
    size_t got = 0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (got + 1 < cap) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        const long left = ms - (long)((now.tv_sec - t0.tv_sec) * 1000 +
                                      (now.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        const ssize_t n = recv(fd, out + got, cap - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    out[got] = '\0';
    return got;
}

void server_blas_core(const struct server *s, char *out, size_t cap)
{
    snprintf(out, cap, "unknown");
    const int fd = raw_connect(s, "127.0.0.1");
    if (fd < 0)
        return;
    char text[1 << 16];
    raw_exchange(
        fd, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        text, sizeof text, 2000);
    close(fd);
    const char *at = strstr(text, "attnd_blas_info{core=\"");
    if (at) {
        at += strlen("attnd_blas_info{core=\"");
        const size_t n = strcspn(at, "\"");
        snprintf(out, cap, "%.*s", (int)(n < 64 ? n : 64), at);
    }
}

bool metric_read(const struct server *s, const char *from, const char *name,
                 double *value)
{
    const int fd = raw_connect(s, from);
    if (fd < 0)
        return false;
    static _Thread_local char out[65536];
    raw_exchange(
        fd, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        out, sizeof out, 2000);
    close(fd);
    char line[160];
    snprintf(line, sizeof line, "\n%s ", name);
    const char *at = strstr(out, line);
    if (!at)
        return false;
    *value = strtod(at + strlen(line), NULL);
    return true;
}

/* The value of header `name` ("Content-Length:") in the headers that end
 * at end, or NULL. */
static const char *header_in(const char *out, const char *end, const char *name)
{
    for (const char *p = strstr(out, "\r\n"); p && p < end;
         p = strstr(p + 2, "\r\n"))
        if (!strncasecmp(p + 2, name, strlen(name)))
            return p + 2 + strlen(name);
    return NULL;
}

/* Whether out (len bytes) holds one whole response: its headers, and a
 * body of Content-Length bytes or a chunked body's last chunk. */
static bool response_complete(const char *out, size_t len)
{
    const char *end = strstr(out, "\r\n\r\n");
    if (!end)
        return false;
    const size_t head = (size_t)(end - out) + 4;
    const char *length = header_in(out, end, "Content-Length:");
    if (length)
        return len >= head + strtoull(length, NULL, 10);
    const char *coding = header_in(out, end, "Transfer-Encoding:");
    if (coding && strstr(coding, "chunked") < end)
        return len >= head + 5 && !memcmp(out + len - 5, "0\r\n\r\n", 5);
    return true; /* no body (304, or closed by the server) */
}

size_t raw_response(int fd, const char *request, char *out, size_t cap, int ms)
{
    if (request && send(fd, request, strlen(request), MSG_NOSIGNAL) < 0)
        return 0;
    size_t got = 0;
    const double until = clock_seconds() + ms / 1e3;
    out[0] = '\0';
    while (got + 1 < cap && !response_complete(out, got)) {
        const double left = until - clock_seconds();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)(left * 1e3) + 1) <= 0)
            break;
        const ssize_t n = recv(fd, out + got, cap - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        out[got] = '\0';
    }
    return got;
}

size_t status_bytes(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    size_t kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, strlen(field)))
            kib = strtoull(line + strlen(field), NULL, 10);
    if (f)
        fclose(f);
    return kib * 1024;
}

char *sentence_body(size_t words, const char *options)
{
    const size_t cap = words * 2 + strlen(options) + 32;
    char *body = malloc(cap);
    if (!body)
        return NULL;
    size_t n = (size_t)snprintf(body, cap, "{\"sentence\":\"");
    for (size_t i = 0; i < words; i++)
        body[n++] = 'a', body[n++] = ' ';
    snprintf(body + n, cap - n, "\",%s}", options);
    return body;
}

/* ------------------------------------------------------------- streams */

/* Complete Server-Sent Events in s->data: blocks ending in a blank line. */
static size_t events_in(const struct stream *s)
{
    size_t n = 0;
    for (const char *p = s->data; p && (p = strstr(p, "\n\n")); p += 2)
        n++;
    return n;
}

static size_t take_stream(char *ptr, size_t size, size_t nmemb, void *arg)
{
    struct stream *s = arg;
    const size_t n = size * nmemb;
    char *grown = realloc(s->data, s->len + n + 1);
    if (!grown)
        return 0;
    s->data = grown;
    memcpy(s->data + s->len, ptr, n);
    s->len += n;
    s->data[s->len] = '\0';
    if (s->stop_after && events_in(s) >= s->stop_after)
        return 0; /* hang up */
    return n;
}

long post_stream(const struct server *s, const char *path, const char *body,
                 const char *accept, struct stream *out, char *type,
                 size_t type_len)
{
    CURL *c = curl_easy_init();
    char url[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", s->port, path);
    struct curl_slist *h =
        curl_slist_append(NULL, "Content-Type: application/json");
    if (accept) {
        char line[128];
        snprintf(line, sizeof line, "Accept: %s", accept);
        h = curl_slist_append(h, line);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, take_stream);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    const char *ct = NULL;
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
    if (type)
        snprintf(type, type_len, "%s", ct ? ct : "");
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return status;
}

bool model_folder_with(const char *variant, char *dir, const char *name,
                       const char *text)
{
    char cwd[1024], from[2048];
    if (!getcwd(cwd, sizeof cwd) || !mkdtemp(dir))
        return false;
    snprintf(from, sizeof from, "%s/tests/models/%s", cwd, variant);
    DIR *d = opendir(from);
    const struct dirent *e;
    bool ok = d != NULL;
    while (ok && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char src[4096], dst[4096];
        snprintf(src, sizeof src, "%s/%s", from, e->d_name);
        snprintf(dst, sizeof dst, "%s/%s", dir, e->d_name);
        ok = symlink(src, dst) == 0;
    }
    if (d)
        closedir(d);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path); /* a link to the variant's own, when it has one */
    FILE *fp = ok ? fopen(path, "w") : NULL;
    ok = fp && fputs(text, fp) >= 0;
    if (fp)
        ok = fclose(fp) == 0 && ok;
    return ok;
}

void model_folder_remove(const char *dir)
{
    DIR *d = opendir(dir);
    const struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/*
 * probe.c - a minimal HTTP/1.0 GET for health checks.
 */
#include "probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

bool probe_url(const char *url, unsigned timeout_seconds)
{
    char host[64] = "", path[256] = "/";
    unsigned port = 80;
    if (strncmp(url, "http://", 7)) {
        fprintf(stderr, "attnd: --probe needs an http:// URL\n");
        return false;
    }
    const char *p = url + 7, *slash = strchr(p, '/'), *colon = strchr(p, ':');
    const size_t host_len = (colon && (!slash || colon < slash))
                                ? (size_t)(colon - p)
                            : slash ? (size_t)(slash - p)
                                    : strlen(p);
    if (host_len == 0 || host_len >= sizeof host)
        return false;
    memcpy(host, p, host_len);
    if (colon && (!slash || colon < slash))
        port = (unsigned)strtoul(colon + 1, NULL, 10);
    if (slash)
        snprintf(path, sizeof path, "%s", slash);
    if (!strcmp(host, "localhost"))
        snprintf(host, sizeof host, "127.0.0.1");

    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1)
        return false;
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return false;
    struct timeval tv = {.tv_sec = (time_t)timeout_seconds};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    bool ok = false;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0) {
        char req[400];
        const int n = snprintf(
            req, sizeof req, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, host);
        char status[32] = "";
        if (n > 0 && write(fd, req, (size_t)n) == n &&
            read(fd, status, sizeof status - 1) >= 12)
            ok = !strncmp(status, "HTTP/1.", 7) && status[9] == '2';
    }
    close(fd);
    return ok;
}

# attnd in a container:
#   docker build -t attnd . && docker run --rm -p 8080:8080 attnd
# then open http://localhost:8080. With Hugging Face checkpoints from the
# host's ./models (docs/models.md):
#   docker run --rm -p 8080:8080 -v $PWD/models:/models:ro \
#     -e ATTND_MODELS=bert=/models/bert-base-uncased attnd

# ---- build: the compiler and the -dev packages, nothing of it ships
FROM debian:bookworm-slim AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      gcc libc6-dev make pkg-config \
      libopenblas-dev libmicrohttpd-dev libcjson-dev libpng-dev libfreetype-dev \
      fonts-dejavu-core \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Makefile ./
COPY src/ src/
COPY server/ server/
RUN make build/attnd && strip build/attnd

# ---- run: the shared libraries, the font and the page
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libopenblas0-pthread libmicrohttpd12 libcjson1 libpng16-16 libfreetype6 \
      fonts-dejavu-core \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin attnd \
 && mkdir /models
COPY --from=build /src/build/attnd /usr/local/bin/attnd
COPY web/ /usr/share/attnd/web/
ENV ATTND_BIND=0.0.0.0 \
    ATTND_PORT=8080 \
    ATTND_WEB_ROOT=/usr/share/attnd/web
USER attnd
EXPOSE 8080
# checkpoints are mounted here, read-only, and named by ATTND_MODELS; the
# image holds none
# attnd checks itself: the image needs no curl. The start period gives a
# large checkpoint time to load (the port opens once every model has).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["/usr/local/bin/attnd", "--probe", "http://127.0.0.1:8080/healthz"]
STOPSIGNAL SIGTERM
# attnd is PID 1: it takes SIGTERM itself, finishes requests and exits 0
ENTRYPOINT ["/usr/local/bin/attnd"]

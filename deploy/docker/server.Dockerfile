# ptxbench-server image. Built from the device bundle (docs/operations.md, "Air-gapped GPU
# nodes"), not from source: the bundle is what every other deployment runs too, it carries the
# exact libraries the binaries were built against (Debian 12), and building here needs no CUDA
# toolkit. On a Debian 12 build machine:
#   scripts/device-bundle
#   docker build -f deploy/docker/server.Dockerfile -t ptxbench-server .
# The server needs an external PostgreSQL 15 (PTXBENCH_DATABASE_URL); the bundled PostgreSQL
# is for the embedded mode, which a container with a volume at /var/lib/ptxbench can use too
# (PTXBENCH_DATABASE_URL empty).
FROM debian:12-slim

ARG BUNDLE=.device-bundle/ptxbench-bundle.tar.xz

RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --home-dir /var/lib/ptxbench --create-home --user-group ptxbench

# ADD unpacks a local tar.xz: /opt/ptxbench-bundle/{bin,lib,pg,tasks,migrations}.
ADD ${BUNDLE} /opt/
RUN ln -s /opt/ptxbench-bundle /opt/ptxbench

USER ptxbench
WORKDIR /var/lib/ptxbench
ENV PTXBENCH_DATABASE_URL=""
# 50051: gRPC (PtxBench, WorkerService, AdminService, health); 9464: Prometheus /metrics.
EXPOSE 50051 9464
STOPSIGNAL SIGTERM
ENTRYPOINT ["/bin/sh", "-c", "exec /opt/ptxbench/bin/ptxbench-server serve --listen 0.0.0.0:50051 --metrics-listen 0.0.0.0:9464 --database-url \"$PTXBENCH_DATABASE_URL\" --data-dir /var/lib/ptxbench --pg-bin-dir /opt/ptxbench/pg/usr/lib/postgresql/15/bin --tasks-dir /opt/ptxbench/tasks --migrations-dir /opt/ptxbench/migrations \"$@\"", "ptxbench-server"]

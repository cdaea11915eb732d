# The `ptxbench` command-line client, from the device bundle (see server.Dockerfile):
#   scripts/device-bundle
#   docker build -f deploy/docker/client.Dockerfile -t ptxbench .
#   docker run --rm -e PTXBENCH_SERVER=host:50051 -e PTXBENCH_TOKEN=... -v "$PWD:/work" \
#     ptxbench submit --task gemm_n7168_k5120 --arch sm_90a --wait /work/kernel.cu
FROM debian:12-slim

ARG BUNDLE=.device-bundle/ptxbench-bundle.tar.xz

RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --create-home --user-group ptxbench

ADD ${BUNDLE} /opt/
RUN ln -s /opt/ptxbench-bundle /opt/ptxbench

USER ptxbench
WORKDIR /work
ENTRYPOINT ["/opt/ptxbench/bin/ptxbench"]
CMD ["--help"]

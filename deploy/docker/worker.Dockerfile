# ptxbench-worker image for one GPU (run one container per GPU, --gpu 0 inside it) or, with
# --compile-only, for CPU machines. CUDA 13 runtime base with cuDNN 9 (the attention tasks'
# reference), plus from NVIDIA's repository (configured in the base image) what the worker
# needs beyond the runtime: ptxas (cuda-nvcc), CUPTI (timing) and compute-sanitizer (feedback
# on runtime errors). Our binaries come from the device bundle, as in server.Dockerfile:
#   scripts/device-bundle
#   docker build -f deploy/docker/worker.Dockerfile -t ptxbench-worker .
# Run as root inside the container with CAP_SYS_ADMIN: the evaluator sandbox unshares a
# network namespace and drops to `nobody` (worker/engine/sandbox.cc); without the capability
# it still runs, not isolated from the network, and says so in its log.
FROM nvidia/cuda:13.0.0-cudnn-runtime-ubuntu24.04

ARG BUNDLE=.device-bundle/ptxbench-bundle.tar.xz

RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        cuda-nvcc-13-0 cuda-cupti-13-0 cuda-sanitizer-13-0 \
    && rm -rf /var/lib/apt/lists/*

ADD ${BUNDLE} /opt/
RUN ln -s /opt/ptxbench-bundle /opt/ptxbench

ENV LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
ENV PTXBENCH_SERVER=server:50051
# PTXBENCH_TOKEN: a worker-role token (docs/operations.md, "Tokens and tenants").
EXPOSE 9470
STOPSIGNAL SIGTERM
# SIGTERM drains: the job in hand finishes and is reported. Give the container at least the
# longest job's time to stop (compose: stop_grace_period; Kubernetes:
# terminationGracePeriodSeconds).
ENTRYPOINT ["/opt/ptxbench/bin/ptxbench-worker", "--tasks-dir", "/opt/ptxbench/tasks", "--metrics-listen", "0.0.0.0:9470"]
CMD ["--gpu", "0"]

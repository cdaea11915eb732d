// FIXTURE HEADER
__device__ inline int fixture_helper() { return 1; }

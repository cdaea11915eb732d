#include "worker/evaluator/evaluator.h"

int main(int argc, char** argv) { return ptxbench::evaluator::Main(argc, argv); }

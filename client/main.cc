// ptxbench: the command-line client. Everything lives in the ptxbench_client library.
#include <iostream>

#include "client/cli.h"

int main(int argc, char** argv) {
  return ptxbench::client::RunCli(std::vector<std::string>(argv + 1, argv + argc), std::cout,
                                  std::cerr);
}

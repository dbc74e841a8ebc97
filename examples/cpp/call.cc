// fgemma from C++ (the C++ API, include/fgemma/function_caller.h, static libfgemma_cpp.a):
// one request to a function call, printed as `fgemma call` prints it.
//
//   find_package(fgemma) + target_link_libraries(app fgemma::fgemma_cpp)     # CMake
//   c++ call.cc $(pkg-config --cflags --libs fgemma-cpp) -o call             # pkg-config
//   ./call MODEL.gguf examples/smart_home.json "turn the light on in the kitchen"
#include <fgemma/function_caller.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL.gguf CATALOG.json REQUEST\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream catalog;
  catalog << in.rdbuf();
  auto model = fg::CallModel::Load(argv[1]);  // once; share it between threads
  if (!model.ok()) {
    std::fprintf(stderr, "fgemma: %s\n", model.status().message().c_str());
    return 1;
  }
  fg::FunctionCallerOptions options;  // fgemma call's defaults
  auto caller = fg::FunctionCaller::Create(*model, catalog.str(), options);
  if (!caller.ok()) {
    std::fprintf(stderr, "fgemma: %s\n", caller.status().message().c_str());
    return 1;
  }
  auto result = (*caller)->Call(argv[3]);
  if (!result.ok()) {
    std::fprintf(stderr, "fgemma: %s\n", result.status().message().c_str());
    return 1;
  }
  const std::string json = result->ToJson(options.max_calls)
                               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::printf("%s\n", json.c_str());
  return 0;
}

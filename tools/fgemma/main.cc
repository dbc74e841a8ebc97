#include "tools/fgemma/commands.h"

int main(int argc, char** argv) { return fg::cli::Main(argc, argv); }

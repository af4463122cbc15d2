// build/bin/shardlab: the harness command line (harness/cli/shardlab.cpp). `shardlab --help` lists
// the commands.
#include "harness/cli/shardlab.hpp"

int main(int argc, char** argv) { return shardlab::shardlab_main(argc, argv); }

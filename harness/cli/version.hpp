#pragma once
#define SHARDLAB_VERSION "0.1.0"

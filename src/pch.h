// Precompiled header for the torch-heavy translation units (MTX_USE_PCH).
#pragma once
#include <torch/torch.h>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

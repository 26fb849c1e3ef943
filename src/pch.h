// Precompiled header for the torch-heavy translation units (MTX_USE_PCH).
#pragma once
#include <torch/torch.h>
#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

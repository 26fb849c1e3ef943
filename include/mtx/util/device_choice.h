// A device as a setting names it (train.device, --device): auto, cpu or cuda. Torch-free, so that config holds it;
// util/device.h's select_device turns it into a torch::Device.
#pragma once

namespace mtx {

enum class DeviceChoice { auto_, cpu, cuda };

}  // namespace mtx

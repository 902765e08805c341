// cudamem: the umbrella header. Everything but interop/.
#pragma once

#include <cudamem/error.hpp>
#include <cudamem/kind.hpp>
#include <cudamem/device.hpp>
#include <cudamem/stream.hpp>
#include <cudamem/ptr.hpp>
#include <cudamem/span.hpp>
#include <cudamem/buffer.hpp>
#include <cudamem/copy.hpp>
#include <cudamem/host_register.hpp>

// SPDX-License-Identifier: MIT
// Compiled to PTX and to a cubin for sm_90, never run: the same kernel body reading and writing through a
// device_buffer's span and through a growable_buffer's span. tools/compare_access.py holds their global loads and
// stores to each other (their widths and count), in PTX and, where cuobjdump is found, in SASS.
#include <cudamem/buffer.hpp>
#include <cudamem/growable.hpp>

#include <utility>

using buffer_span = decltype(std::declval<cudamem::device_buffer<float4>&>().view());
using buffer_const_span = decltype(std::declval<const cudamem::device_buffer<float4>&>().view());
using growable_span = decltype(std::declval<cudamem::growable_buffer<float4>&>().view());
using growable_const_span = decltype(std::declval<const cudamem::growable_buffer<float4>&>().view());

template <class Out, class In>
__device__ void scale(Out out, In in) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < in.size(); i += gridDim.x * blockDim.x) {
    const float4 v = in[i];
    out[i] = make_float4(v.x * 2, v.y * 2, v.z * 2, v.w * 2);
  }
}
extern "C" __global__ void through_device_buffer(buffer_span out, buffer_const_span in) { scale(out, in); }
extern "C" __global__ void through_growable_buffer(growable_span out, growable_const_span in) { scale(out, in); }

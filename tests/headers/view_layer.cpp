// SPDX-License-Identifier: MIT
// The view headers (ptr, kind, span, pitched_span) include only the view layer, so that a kernel file taking views
// compiles no stream, owner, resource, lock or copy engine: had one of them come in, a definition below would
// redefine it and this file would not compile. view_layer.cu compiles the same with nvcc.
#include <cudamem/kind.hpp>
#include <cudamem/pitched_span.hpp>
#include <cudamem/ptr.hpp>
#include <cudamem/span.hpp>

#if defined(__GLIBCXX__) && (defined(_GLIBCXX_MUTEX) || defined(_GLIBCXX_THREAD) || defined(_GLIBCXX_VECTOR))
#error "a view header includes <mutex>, <thread> or <vector>"
#endif

namespace cudamem {
class stream_ref {};  // stream.hpp
template <class T, class Kind>
class buffer {};  // buffer.hpp
template <class T, class Kind>
class pitched_buffer {};  // pitched.hpp
template <class Kind>
class resource_ref {};  // resource.hpp
namespace detail {
struct operand {};  // detail/transfer.hpp, the copy engine
struct copy_fn {};  // copy.hpp
}  // namespace detail
}  // namespace cudamem

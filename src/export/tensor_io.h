// Tensors in and out of `fgemma invoke`, spelled as iree-run-module spells them, so the same
// command lines drive the host oracle and the compiled module:
//   --input=1x24xi32=2 105 ...      values (space or comma separated, [ ] allowed; one value
//                                   fills the whole tensor)
//   --input=1x1x7x256xf32=@k.bin    raw little-endian bytes, exactly the tensor's size
//   --input=@file.npy               NumPy .npy v1/v2 (little-endian f4/i4, C order)
//   --output=@file.npy              one .npy per result, in order
// and results printed as iree-run-module prints them ("result[0]: hal.buffer_view" then
// "1xi32=32691", f32 with %G, nested [..] per row, at most 1024 elements then "...").
// Only f32 and i32 (the contract's element types); anything else is a clear error.
#ifndef FGEMMA_EXPORT_TENSOR_IO_H_
#define FGEMMA_EXPORT_TENSOR_IO_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "fgemma/status.h"
#include "src/export/host_invoke.h"

namespace fg::exporter {

// Parses one --input value. Errors (InvalidArgument, or NotFound for a missing file) say what
// is wrong: the shape/type spelling, the value count, the file, the .npy header.
StatusOr<HostTensor> ParseTensorArg(std::string_view spec);

// NumPy .npy files: version 1.0, 2.0 (and 3.0) headers; dtype '<f4' or '<i4' ('|' and '='
// byte orders of a little-endian host accepted); fortran_order False. Files are regular files
// (file_io.h; a raw @file is at most the shape's size, a .npy at most 4 GiB); WriteNpy writes
// atomically (a temporary file renamed into place).
StatusOr<HostTensor> ReadNpy(const std::string& path);
StatusOr<HostTensor> ParseNpy(std::string_view bytes, const std::string& what);
Status WriteNpy(const std::string& path, const HostTensor& t);  // version 1.0, '<f4' / '<i4'
std::string NpyBytes(const HostTensor& t);

// "1x24xi32=..." as iree-run-module prints a buffer view (no trailing newline).
std::string FormatTensor(const HostTensor& t, int64_t max_elements = 1024);

}  // namespace fg::exporter

#endif  // FGEMMA_EXPORT_TENSOR_IO_H_

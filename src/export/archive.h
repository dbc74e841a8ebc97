// The parameter archive of an export: every weight the exported functions read, once, keyed by
// its GGUF tensor name (docs/contract.md "fgemma addition"), dequantized from the GGUF blocks and
// stored as bf16 (round to nearest even), f16 or f32; 1-D norm vectors stay f32
// (StoredWeightType).
#ifndef FGEMMA_EXPORT_ARCHIVE_H_
#define FGEMMA_EXPORT_ARCHIVE_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fgemma/status.h"
#include "src/export/irpa.h"
#include "src/export/stablehlo.h"
#include "src/gguf/reader.h"
#include "src/graph/graph.h"

namespace fg::exporter {

// Converts one GGUF tensor to `type` (the archive bytes, little-endian). `out` must hold
// n_elements * WeightTypeBytes(type) bytes.
Status ConvertTensor(const gguf::TensorInfo& t, WeightType type, std::span<uint8_t> out);

// Adds every weight of `graphs` (each name once) to `writer`, read from `file` when written.
// NotFound names a tensor the file lacks; InvalidArgument a shape that disagrees.
Status AddGraphWeights(const gguf::File& file, std::span<const graph::Graph* const> graphs,
                       WeightType type, IrpaWriter* writer);

}  // namespace fg::exporter

#endif  // FGEMMA_EXPORT_ARCHIVE_H_

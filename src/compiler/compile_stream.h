// The compile that streams its table into an artifact being written, which
// compile_checkpoint, compile_array and compile_checkpoint_tables build on.
#pragma once

#include "artifact/artifact_io.h"
#include "qemb/compiler.h"

namespace qemb {

// compile_rows (qemb/compiler.h), writing the table into `out` as its rows are produced (the
// output is never in memory whole); then call out.finish(*result.runtime_graph,
// result.metadata). The returned graphs hold the table as StreamedData: shapes
// and encodings, with the bytes in the file only.
Result<CompiledEmbedding> compile_rows(const RowSource& rows, const CompileOptions& options,
                                       const TargetVersion& target, ArtifactStream& out,
                                       const TableSource& source = {});

}  // namespace qemb

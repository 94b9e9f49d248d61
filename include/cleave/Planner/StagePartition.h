//===- StagePartition.h - Layers to pipeline chunks --------------*- C++
//-*-===//
//
// The pipeline stage partition: which consecutive layers each pipeline chunk
// runs, so that the slowest chunk (which paces the pipeline) is as fast as
// possible. The first chunk also runs the embedding and the last the output
// layer and the loss, so an even split is rarely balanced.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLANNER_STAGEPARTITION_H
#define CLEAVE_PLANNER_STAGEPARTITION_H

#include <vector>

namespace cleave::planner {

/// Splits the layers (one cost each, in model order) into `chunks`
/// consecutive chunks of at least one layer, minimizing the largest chunk
/// cost, where chunk 0 also costs `firstExtra` and the last chunk
/// `lastExtra`. Dynamic programming over layers (O(chunks x layers x log
/// layers)). Among the optimal partitions it returns the one with the most
/// layers in the latest chunks: early pipeline stages keep more micro-batches
/// alive, so they should hold fewer layers. Returns the layer count of each
/// chunk; empty if there are more chunks than layers or no chunk.
std::vector<int> balancedPartition(const std::vector<double> &layerCosts,
                                   double firstExtra, double lastExtra,
                                   int chunks);

/// The largest chunk cost of `partition` (as balancedPartition counts it).
double bottleneck(const std::vector<double> &layerCosts, double firstExtra,
                  double lastExtra, const std::vector<int> &partition);

} // namespace cleave::planner

#endif // CLEAVE_PLANNER_STAGEPARTITION_H

//===- AttentionUtils.h - Shared by the attention lowerings -----*- C++ -*-===//
//
// Private to lib/Conversion: the layout changes that both attention
// lowerings (materialised and tiled) use.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_CONVERSION_ATTENTIONUTILS_H
#define CLEAVE_LIB_CONVERSION_ATTENTIONUTILS_H

#include "LoweringUtils.h"

namespace mlir::cleave {

/// Shapes of one attention op: q is [b, s, hq, d], k [b, skv, hkv, d],
/// v [b, skv, hkv, dv].
struct AttnShape {
  int64_t b, s, skv, hq, hkv, d, dv;
  int64_t groups() const { return hq / hkv; }
};
AttnShape attentionShapeOf(Value q, Value k, Value v);

/// [B, L, H, D] -> [B*Hq, L, D], repeating each head `groups` times.
Value toHeadMajor(OpBuilder &b, Location loc, Value x, int64_t hq,
                  int64_t groups);
/// `layout(x)`: the layout copy an attention op makes of an operand. If `x`
/// is a cleave.optimization_barrier (the attention is recomputed,
/// cleave-remat), the copy is made of the barrier's input instead, the same
/// copy the forward attention and the gradient make (CSE shares it: the
/// recomputation neither keeps the operand alive in both layouts until the
/// backward pass nor copies it again), and the barrier moves onto the copy,
/// which still keeps the recomputed attention apart from the forward one.
Value layoutBehindBarrier(OpBuilder &b, Location loc, Value x,
                          function_ref<Value(Value)> layout);
/// [B*Hq, L, D] -> [B, L, Hq, D].
Value fromHeadMajor(OpBuilder &b, Location loc, Value x, int64_t batch,
                    int64_t hq);
/// [B*Hq, L, D] -> [B, L, Hkv, D], summing the query heads of each group.
Value sumGroups(OpBuilder &b, Location loc, Value x, const AttnShape &a,
                Type elem);

/// The tiled (flash) lowering of attention and its gradient, with query and
/// key tiles of `tile` rows.
void populateFlashAttentionPatterns(RewritePatternSet &patterns, int64_t tile);

} // namespace mlir::cleave

#endif // CLEAVE_LIB_CONVERSION_ATTENTIONUTILS_H

//===- CleaveAttrs.td - Cleave attributes ------------------*- tablegen -*-===//

#ifndef CLEAVE_DIALECT_CLEAVEATTRS_TD
#define CLEAVE_DIALECT_CLEAVEATTRS_TD

include "cleave/Dialect/CleaveBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

class Cleave_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Cleave_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Cleave_ShardingAttr : Cleave_Attr<"Sharding", "sharding"> {
  let summary = "How a tensor is split across the axes of a device mesh.";
  let description = [{
    `#cleave.sharding<@mesh, [dim 0, dim 1, ...]>` lists, for every
    dimension of a tensor, what splits it: `_` (replicated), one mesh axis
    (`dp`), or several axes in parentheses, major axis first (`(dp, tp)`),
    the order of a JAX `PartitionSpec`. The optional `partial = [axes]` part
    names the axes over which the value is a pending sum: every device of such
    an axis holds an addend, and the logical value is their sum (DTensor's
    `Partial`).

    ```mlir
    cleave.mesh @world(dp = 2 : ib, tp = 4 : nvlink)
    // rows over dp, columns over tp
    #cleave.sharding<@world, [dp, tp]>
    // replicated rows, columns over both axes, dp-major
    #cleave.sharding<@world, [_, (dp, tp)]>
    // a matmul result whose contracting dimension was split over tp
    #cleave.sharding<@world, [dp, _], partial = [tp]>
    // fully replicated scalar
    #cleave.sharding<@world, []>
    ```

    The sharding is checked against its mesh and tensor wherever it is
    attached: the number of dimension entries equals the tensor rank, every
    axis exists in the mesh, no axis is used twice, and every dimension is
    divisible by the product of the sizes of its axes.
  }];
  let parameters = (ins
    AttrParameter<"::mlir::FlatSymbolRefAttr", "the mesh">:$mesh,
    AttrParameter<"::mlir::ArrayAttr",
                  "per dimension, an array of axis-name strings">:$dims,
    AttrParameter<"::mlir::ArrayAttr", "partial-sum axis names">:$partial
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "::llvm::StringRef":$mesh,
                     "::llvm::ArrayRef<::llvm::SmallVector<::llvm::StringRef>>":$dims,
                     CArg<"::llvm::ArrayRef<::llvm::StringRef>", "{}">:$partial)>
  ];
  let extraClassDeclaration = [{
    /// Number of tensor dimensions this sharding describes.
    unsigned getRank() const { return getDims().size(); }
    /// The axes splitting dimension `dim`, major first.
    ::llvm::SmallVector<::llvm::StringRef> getDimAxes(unsigned dim) const;
    /// The partial-sum axes.
    ::llvm::SmallVector<::llvm::StringRef> getPartialAxes() const;
    /// Every axis this sharding uses (split or partial), in order of use.
    ::llvm::SmallVector<::llvm::StringRef> getUsedAxes() const;
    /// True if no dimension is split and nothing is partial.
    bool isFullyReplicated() const;
    /// A replicated sharding of rank `rank` on `mesh`.
    static ShardingAttr getReplicated(::mlir::MLIRContext *ctx,
                                      ::llvm::StringRef mesh, unsigned rank);
  }];
}

def Cleave_InitAttr : Cleave_Attr<"Init", "init"> {
  let summary = "How a parameter is initialized.";
  let description = [{
    Attached to a function argument that is a parameter, as
    `cleave.init = #cleave.init<normal, 0.02>`. Kinds: `zeros`, `ones`,
    `normal` (mean 0, the given standard deviation) and `uniform` (in
    [-scale, scale]). The runtime draws values from the run's seed and the
    parameter's name with a counter-based generator, so a parameter gets the
    same values whatever mesh it is later sharded on.

    ```mlir
    func.func @f(%w: tensor<64x64xf32> {cleave.param = "fc1.weight",
                                        cleave.init = #cleave.init<normal, 0.02>})
    ```
  }];
  let parameters = (ins
    "::mlir::cleave::InitKind":$kind,
    APFloatParameter<"standard deviation or bound (0 for zeros, ones)">:$scale
  );
  let builders = [
    AttrBuilder<(ins "::mlir::cleave::InitKind":$kind,
                     CArg<"double", "0.0">:$scale)>
  ];
  let skipDefaultBuilders = 1;
  let extraClassDeclaration = [{
    /// The scale as a double.
    double getScaleValue() const;
  }];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

#endif // CLEAVE_DIALECT_CLEAVEATTRS_TD

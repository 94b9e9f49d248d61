//===- CleaveTypes.td - Types of the cleave dialect ---------*- tablegen -*-===//
//
// Tensors are builtin ranked tensors; the dialect's own types are the
// handles of asynchronous communication.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECT_CLEAVETYPES_TD
#define CLEAVE_DIALECT_CLEAVETYPES_TD

include "cleave/Dialect/CleaveBase.td"
include "mlir/IR/AttrTypeBase.td"

class Cleave_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Cleave_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Cleave_RequestType : Cleave_Type<"Request", "request"> {
  let summary = "A communication in flight, started and not yet waited.";
  let description = [{
    The result of a `cleave.*_start` op, consumed by exactly one
    `cleave.wait`. The parameter is the tensor the wait produces (the
    collective's result, the received tensor); a send's request has none.

    ```mlir
    !cleave.request<tensor<768x768xf32>>   // all_reduce_start, recv_start, ...
    !cleave.request                        // send_start
    ```
  }];
  let parameters = (ins OptionalParameter<"::mlir::Type">:$valueType);
  let assemblyFormat = "(`<` $valueType^ `>`)?";
  let builders = [
    TypeBuilder<(ins), [{ return $_get($_ctxt, ::mlir::Type()); }]>
  ];
  let skipDefaultBuilders = 0;
}

#endif // CLEAVE_DIALECT_CLEAVETYPES_TD

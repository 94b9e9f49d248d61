// RUN: cleave-opt %s --cleave-propagate-sharding --cleave-partition | FileCheck %s --check-prefix=TIME
// RUN: cleave-opt %s --cleave-propagate-sharding --cleave-partition="reshard-cost=bytes" | FileCheck %s --check-prefix=BYTES
// RUN: cleave-opt %s --cleave-propagate-sharding --cleave-partition="cluster-file=%S/Inputs/pcie-box-fast-network.json" | FileCheck %s --check-prefix=FASTNET
// RUN: not cleave-opt %s --cleave-partition="cluster=tpu-v5" 2>&1 | FileCheck %s --check-prefix=PRESET
// RUN: not cleave-opt %s --cleave-partition="reshard-cost=flops" 2>&1 | FileCheck %s --check-prefix=RANKING

// The partitioner ranks the candidate resharding sequences by their time on
// the cluster (each collective priced on its mesh axes' links), not by the
// bytes they send. 'a' crosses nodes over InfiniBand (25 GB/s per GPU on
// the default dgx-a100-80gb), 'b' stays on NVLink (300 GB/s).
// PRESET: error: cleave-partition: unknown cluster preset 'tpu-v5' (known: dgx-a100-40gb, dgx-a100-80gb, dgx-h100, dgx-h200)
// RANKING: error: cleave-partition: reshard-cost must be 'time' or 'bytes', not 'flops'
cleave.mesh @m(a = 2 : ib, b = 4 : nvlink)

// [a, b] -> [_, (a, b)] of 4 MiB. Gathering over 'b' first and moving 'a'
// with an all-to-all sends the fewest bytes (1.5 MiB on NVLink + 1 MiB on
// InfiniBand; cleave-estimate: 87.6 us), but gathering over 'a' first sends
// only 0.5 MiB over the slow link (+ 3 MiB on NVLink; 71.6 us).
// TIME-LABEL: func.func @fewest_bytes_on_the_slow_link
// TIME: %[[A:.*]] = cleave.all_gather %{{.*}} on @m axes = [a] dim = 0 : tensor<512x256xf32> -> tensor<1024x256xf32>
// TIME: %[[B:.*]] = cleave.all_gather %[[A]] on @m axes = [b] dim = 1 : tensor<1024x256xf32> -> tensor<1024x1024xf32>
// TIME: cleave.shard %[[B]] on @m axes = [a, b] dim = 1 : tensor<1024x1024xf32> -> tensor<1024x128xf32>
// TIME-NOT: cleave.all_to_all
// BYTES-LABEL: func.func @fewest_bytes_on_the_slow_link
// BYTES: %[[B:.*]] = cleave.all_gather %{{.*}} on @m axes = [b] dim = 1 : tensor<512x256xf32> -> tensor<512x1024xf32>
// BYTES: %[[T:.*]] = cleave.all_to_all %[[B]] on @m axes = [a] split_dim = 1 concat_dim = 0 : tensor<512x1024xf32> -> tensor<1024x512xf32>
// BYTES: cleave.shard %[[T]] on @m axes = [b] dim = 1 : tensor<1024x512xf32> -> tensor<1024x128xf32>
// With a slow PCIe box and a fast network, the fewest bytes are also the
// fastest.
// FASTNET-LABEL: func.func @fewest_bytes_on_the_slow_link
// FASTNET: cleave.all_gather %{{.*}} on @m axes = [b] dim = 1
// FASTNET: cleave.all_to_all %{{.*}} on @m axes = [a] split_dim = 1 concat_dim = 0
func.func @fewest_bytes_on_the_slow_link(%x: tensor<1024x1024xf32> {cleave.sharding = #cleave.sharding<@m, [a, b]>})
    -> (tensor<1024x1024xf32> {cleave.sharding = #cleave.sharding<@m, [_, (a, b)]>}) {
  return %x : tensor<1024x1024xf32>
}

// The mirror image, where the greedy order (first dimension first) would
// gather over 'b' first: time picks the sequence that starts with the
// second dimension's gather over 'a'.
// TIME-LABEL: func.func @not_the_first_dimension
// TIME: %[[A:.*]] = cleave.all_gather %{{.*}} on @m axes = [a] dim = 1 : tensor<256x512xf32> -> tensor<256x1024xf32>
// TIME: %[[B:.*]] = cleave.all_gather %[[A]] on @m axes = [b] dim = 0 : tensor<256x1024xf32> -> tensor<1024x1024xf32>
// TIME: cleave.shard %[[B]] on @m axes = [a, b] dim = 0 : tensor<1024x1024xf32> -> tensor<128x1024xf32>
// BYTES-LABEL: func.func @not_the_first_dimension
// BYTES: cleave.all_gather %{{.*}} on @m axes = [b] dim = 0 : tensor<256x512xf32> -> tensor<1024x512xf32>
// BYTES: cleave.all_to_all %{{.*}} on @m axes = [a] split_dim = 0 concat_dim = 1
// FASTNET-LABEL: func.func @not_the_first_dimension
// FASTNET: cleave.all_gather %{{.*}} on @m axes = [b] dim = 0
// FASTNET: cleave.all_to_all %{{.*}} on @m axes = [a] split_dim = 0 concat_dim = 1
func.func @not_the_first_dimension(%x: tensor<1024x1024xf32> {cleave.sharding = #cleave.sharding<@m, [b, a]>})
    -> (tensor<1024x1024xf32> {cleave.sharding = #cleave.sharding<@m, [(a, b), _]>}) {
  return %x : tensor<1024x1024xf32>
}

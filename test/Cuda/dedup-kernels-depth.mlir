// Identical layers compile to the same kernels (cleave-cuda-dedup-kernels):
// the partitioned GPT step (dp 2 x tp 2 with sequence parallelism) has as
// many kernels at 4 layers as at 2, all accepted by ptxas.
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t
// RUN: cleave-models --model tiny-gpt --layers 2 | cleave-opt --cleave-autodiff --cleave-apply-plan="dp=2 tp=2 sp=true" --cleave-propagate-sharding --cleave-partition | cleave-opt --cleave-lower-to-cuda="ptxas-report=%t/l2.json" -o /dev/null
// RUN: cleave-models --model tiny-gpt --layers 4 | cleave-opt --cleave-autodiff --cleave-apply-plan="dp=2 tp=2 sp=true" --cleave-propagate-sharding --cleave-partition | cleave-opt --cleave-lower-to-cuda="ptxas-report=%t/l4.json" -o /dev/null
// RUN: %python %S/Inputs/check_ptxas_report.py %t/l2.json --label layers-2 --max-registers 128 > %t/counts.txt
// RUN: %python %S/Inputs/check_ptxas_report.py %t/l4.json --label layers-4 --max-registers 128 >> %t/counts.txt
// RUN: FileCheck %s < %t/counts.txt

// CHECK: layers-2: [[N:[0-9]+]] kernels,
// CHECK: layers-4: [[N]] kernels,

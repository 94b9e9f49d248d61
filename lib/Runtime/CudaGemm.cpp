//===- CudaGemm.cpp - GEMMs on cuBLASLt -----------------------------------===//

#include "CudaGemm.h"
#include "DType.h"
#include "Env.h"
#include "Error.h"

#include "cleave/Runtime/CudaRuntime.h"

namespace cleave::rt {
namespace {

void checkLt(cublasStatus_t status, const std::string &what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw RuntimeError(concat("cuBLASLt ", what,
                              " failed: ", cublasLtGetStatusName(status), " (",
                              cublasLtGetStatusString(status), ")"));
}

/// The largest power of two (at most 256) dividing the address.
int64_t alignmentOf(const void *ptr) {
  auto address = reinterpret_cast<uintptr_t>(ptr);
  int64_t align = 1;
  while (align < 256 && address % uintptr_t(align * 2) == 0)
    align *= 2;
  return align;
}

struct Types {
  cudaDataType_t data, scale;
  cublasComputeType_t compute;
};

Types typesFor(int32_t dtype, bool tf32) {
  switch (dtype) {
  case CLEAVE_F32:
    return {CUDA_R_32F, CUDA_R_32F,
            tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
  case CLEAVE_F64:
    return {CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F};
  case CLEAVE_BF16:
    return {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F};
  case CLEAVE_F16:
    return {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
  default:
    throw RuntimeError(concat("gemm: no cuBLASLt type for ", dtypeName(dtype)));
  }
}

/// A column-major layout with an optional strided batch.
cublasLtMatrixLayout_t layout(cudaDataType_t type, int64_t rows, int64_t cols,
                              int64_t ld, int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t l;
  checkLt(
      cublasLtMatrixLayoutCreate(&l, type, uint64_t(rows), uint64_t(cols), ld),
      "layout");
  if (batch > 1) {
    int32_t count = int32_t(batch);
    checkLt(cublasLtMatrixLayoutSetAttribute(
                l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
            "batch count");
    checkLt(cublasLtMatrixLayoutSetAttribute(
                l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                sizeof(stride)),
            "batch stride");
  }
  return l;
}

} // namespace

CudaGemm::CudaGemm(CudaDevice &device)
    : device_(device),
      workspaceBytes_(size_t(envInt("CLEAVE_CUBLASLT_WORKSPACE_MB", 32)) << 20),
      tf32_(envFlag("CLEAVE_CUDA_TF32")) {
  checkLt(cublasLtCreate(&handle_), "handle creation");
  if (workspaceBytes_)
    cudaCheck(cuMemAlloc(&workspace_, workspaceBytes_),
              "allocating the cuBLASLt workspace");
}

CudaGemm::~CudaGemm() {
  for (auto &[key, p] : plans_)
    destroy(p);
  if (workspace_)
    cuMemFree(workspace_);
  if (handle_)
    cublasLtDestroy(handle_);
}

void CudaGemm::destroy(Plan &p) {
  if (p.desc)
    cublasLtMatmulDescDestroy(p.desc);
  for (cublasLtMatrixLayout_t l : {p.first, p.second, p.out})
    if (l)
      cublasLtMatrixLayoutDestroy(l);
}

CudaGemm::Plan &CudaGemm::plan(const GemmArgs &g, int32_t epilogue,
                               const Key &key) {
  auto it = plans_.find(key);
  if (it != plans_.end())
    return it->second;
  Types t = typesFor(g.dtype, tf32_);
  Plan p;
  checkLt(cublasLtMatmulDescCreate(&p.desc, t.compute, t.scale),
          "descriptor creation");
  // Row-major C (m x n) = op(A) op(B) is column-major C^T (n x m) =
  // op(B^T) op(A^T): cuBLASLt's first operand is our B, its second our A.
  cublasOperation_t opFirst = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opSecond = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  checkLt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                         &opFirst, sizeof(opFirst)),
          "transpose attribute");
  checkLt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                         &opSecond, sizeof(opSecond)),
          "transpose attribute");
  if (epilogue != CLEAVE_EPILOGUE_NONE) {
    cublasLtEpilogue_t e = epilogue == CLEAVE_EPILOGUE_BIAS
                               ? CUBLASLT_EPILOGUE_BIAS
                               : CUBLASLT_EPILOGUE_GELU_BIAS;
    checkLt(cublasLtMatmulDescSetAttribute(
                p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)),
            "epilogue attribute");
    checkLt(cublasLtMatmulDescSetAttribute(p.desc,
                                           CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                           &t.data, sizeof(t.data)),
            "bias type attribute");
  }
  p.first = g.transB ? layout(t.data, g.k, g.n, g.ldb, g.batch, g.strideB)
                     : layout(t.data, g.n, g.k, g.ldb, g.batch, g.strideB);
  p.second = g.transA ? layout(t.data, g.m, g.k, g.lda, g.batch, g.strideA)
                      : layout(t.data, g.k, g.m, g.lda, g.batch, g.strideA);
  p.out = layout(t.data, g.n, g.m, g.ldc, g.batch, g.strideC);

  cublasLtMatmulPreference_t pref;
  checkLt(cublasLtMatmulPreferenceCreate(&pref), "preference creation");
  uint64_t workspace = workspaceBytes_;
  cublasLtMatmulPreferenceSetAttribute(pref,
                                       CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &workspace, sizeof(workspace));
  uint32_t align[4] = {uint32_t(key[16]), uint32_t(key[17]), uint32_t(key[18]),
                       uint32_t(key[18])};
  const cublasLtMatmulPreferenceAttributes_t alignAttrs[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i)
    cublasLtMatmulPreferenceSetAttribute(pref, alignAttrs[i], &align[i],
                                         sizeof(uint32_t));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.first, p.second, p.out,
                                     p.out, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    destroy(p);
    checkLt(status, "algorithm selection");
    throw RuntimeError(concat("cuBLASLt has no algorithm for a ",
                              dtypeName(g.dtype), " GEMM of m ", g.m, ", n ",
                              g.n, ", k ", g.k, ", batch ", g.batch));
  }
  p.algo = result.algo;
  return plans_.emplace(key, p).first->second;
}

void CudaGemm::run(const GemmArgs &g, int32_t epilogue, const void *bias,
                   CUstream stream) {
  if (g.batch == 0 || g.m == 0 || g.n == 0)
    return;
  Key key = {g.dtype,
             g.transA,
             g.transB,
             g.batch,
             g.m,
             g.n,
             g.k,
             g.lda,
             g.ldb,
             g.ldc,
             g.strideA,
             g.strideB,
             g.strideC,
             epilogue,
             tf32_,
             0,
             alignmentOf(g.b),
             alignmentOf(g.a),
             alignmentOf(g.c),
             0};
  Plan &p = plan(g, epilogue, key);
  if (epilogue != CLEAVE_EPILOGUE_NONE)
    checkLt(cublasLtMatmulDescSetAttribute(
                p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
            "bias pointer attribute");
  double alphaD = g.alpha, betaD = g.beta;
  float alphaF = float(g.alpha), betaF = float(g.beta);
  bool f64 = g.dtype == CLEAVE_F64;
  checkLt(cublasLtMatmul(handle_, p.desc, f64 ? (void *)&alphaD : &alphaF, g.b,
                         p.first, g.a, p.second, f64 ? (void *)&betaD : &betaF,
                         g.c, p.out, g.c, p.out, &p.algo,
                         reinterpret_cast<void *>(workspace_), workspaceBytes_,
                         stream),
          concat("matmul (", dtypeName(g.dtype), ", m ", g.m, ", n ", g.n,
                 ", k ", g.k, ", batch ", g.batch, ")"));
}

} // namespace cleave::rt

/*===- Runtime.h - The Cleave runtime's C ABI ----------------------*- C
-*-===*\
|*                                                                            *|
|* What compiled Cleave programs and host tools (cleave-run, front-ends)      *|
|* call. Plain C, no LLVM/MLIR: a user program links libCleaveRuntime alone.  *|
|*                                                                            *|
|* Errors are sticky: a failing call records a message (naming the rank, the  *|
|* operation and the group) and every later communication call returns at    *|
|* once without communicating, so a compiled step never hangs on a broken    *|
|* communicator. Host code checks cleave_rt_failed() after each step.        *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef CLEAVE_RUNTIME_RUNTIME_H
#define CLEAVE_RUNTIME_RUNTIME_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*/
/* Element types and reductions (codes are part of the ABI: generated code   */
/* passes them as integers). The element types are the rows of DTypes.def,   */
/* CLEAVE_F32 = 0 to CLEAVE_I64 = 5.                                          */
/*===----------------------------------------------------------------------===*/

typedef enum {
#define CLEAVE_DTYPE(ENUM, CODE, NAME, FILE_NAME, BYTES, IS_FLOAT, BITS)       \
  CLEAVE_##ENUM = CODE,
#include "cleave/Runtime/DTypes.def"
} cleave_dtype_t;

typedef enum {
  CLEAVE_SUM = 0,
  CLEAVE_MAX = 1,
  CLEAVE_MIN = 2,
  CLEAVE_AVG = 3,
} cleave_reduce_t;

/** Bytes per element of `dtype`, or 0 for an unknown code. */
int64_t cleave_rt_dtype_size(int32_t dtype);
/** The element type's name ("f32", "bf16", ...), or NULL for an unknown
 *  code. */
const char *cleave_rt_dtype_name(int32_t dtype);

/*===----------------------------------------------------------------------===*/
/* Errors                                                                     */
/*===----------------------------------------------------------------------===*/

/** Non-zero once any runtime call has failed. */
int cleave_rt_failed(void);
/** The first failure's message ("" if none), e.g. "rank 2: all_reduce on
 *  group 1 (mesh axes [tp], ranks 0,1,2,3) timed out after 30000 ms". */
const char *cleave_rt_error_message(void);
/** Forgets the failure (after the host has rebuilt what it needs). */
void cleave_rt_clear_error(void);

/*===----------------------------------------------------------------------===*/
/* Process setup                                                              */
/*===----------------------------------------------------------------------===*/

typedef struct {
  /** "cpu" (Gloo, OpenBLAS) or "cuda" (NCCL, cuBLASLt). NULL means "cpu". */
  const char *backend;
  /** Rank and world size; -1 means "read the environment": RANK /
   *  WORLD_SIZE / LOCAL_RANK (torchrun, Slurm wrappers), else
   *  OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK (Open MPI), else 0 / 1. */
  int32_t rank, world_size, local_rank;
  /** Rendezvous: "file:/shared/dir" or "tcp://host:port"; NULL means
   *  CLEAVE_RENDEZVOUS, else tcp://MASTER_ADDR:MASTER_PORT. Unused when the
   *  world size is 1. */
  const char *rendezvous;
  /** Timeout of every blocking call in milliseconds; 0 means
   *  CLEAVE_TIMEOUT_MS, else 300000. */
  int64_t timeout_ms;
} cleave_rt_options_t;

/** Fills `opts` with "read everything from the environment". */
void cleave_rt_default_options(cleave_rt_options_t *opts);
/** Initializes the process (and, for world size > 1, connects the world).
 *  Returns 0 on success; on failure, non-zero and cleave_rt_error_message(). */
int cleave_rt_init(const cleave_rt_options_t *opts);
void cleave_rt_finalize(void);
int32_t cleave_rt_rank(void);
int32_t cleave_rt_world_size(void);
int32_t cleave_rt_local_rank(void);

/*===----------------------------------------------------------------------===*/
/* Device meshes and communicator groups                                      */
/*===----------------------------------------------------------------------===*/

/** The group of all ranks in rank order, connected by cleave_rt_init. */
#define CLEAVE_WORLD_GROUP (-1)

/** Declares the device mesh: ranks are laid out row-major over `shape`
 *  (last axis fastest). The product must equal the world size. */
int cleave_rt_define_mesh(int64_t ndims, const int64_t *shape,
                          const char *const *axis_names);
/** Creates communicator group `group_id` along the mesh axes `axes` (axis
 *  indices, major first): this rank's group is the set of ranks that share
 *  its coordinates on every other axis; its index in the group is row-major
 *  over `axes` in the order given. Every rank calls this with the same ids
 *  and axes in the same order. Ids are >= 0 (-1 is CLEAVE_WORLD_GROUP);
 *  defining an id again replaces its communicator (also after an error,
 *  once cleave_rt_clear_error was called). */
int cleave_rt_define_group(int64_t group_id, int64_t naxes,
                           const int64_t *axes);
int64_t cleave_rt_group_rank(int64_t group_id);
int64_t cleave_rt_group_size(int64_t group_id);

/*===----------------------------------------------------------------------===*/
/* Collectives called by generated code. Buffers are contiguous; `count` is  */
/* in elements. Blocks are ordered by group index.                           */
/*===----------------------------------------------------------------------===*/

/** out[i] = reduce over the group of in[i]; `in` may equal `out`. */
void cleave_rt_all_reduce(int64_t group, int32_t dtype, int32_t op,
                          const void *in, void *out, int64_t count);
/** out = concat over the group of `in` (count elements each). */
void cleave_rt_all_gather(int64_t group, int32_t dtype, const void *in,
                          void *out, int64_t count);
/** `in` holds group-size blocks of `count`; out = reduction of block
 *  (group rank) over the group. */
void cleave_rt_reduce_scatter(int64_t group, int32_t dtype, int32_t op,
                              const void *in, void *out, int64_t count);
/** Block j of `in` goes to group rank j; block i of `out` comes from i. */
void cleave_rt_all_to_all(int64_t group, int32_t dtype, const void *in,
                          void *out, int64_t count);
/** `pairs` holds npairs (source, target) group ranks; a rank that is no
 *  target gets zeros. */
void cleave_rt_collective_permute(int64_t group, int32_t dtype, const void *in,
                                  void *out, int64_t count, int64_t npairs,
                                  const int64_t *pairs);
void cleave_rt_send(int64_t group, int64_t peer, int32_t dtype, const void *in,
                    int64_t count);
void cleave_rt_recv(int64_t group, int64_t peer, int32_t dtype, void *out,
                    int64_t count);
/** Blocks until every rank of the group arrives. */
void cleave_rt_barrier(int64_t group);
/** `data` of group rank `root` is copied to `data` of every member
 *  (host tools: parameters loaded on one rank). */
void cleave_rt_broadcast(int64_t group, int64_t root, int32_t dtype, void *data,
                         int64_t count);

/*===----------------------------------------------------------------------===*/
/* Asynchronous communication (docs/runtime.md). A start queues the call on  */
/* the communication progress thread and returns a request handle (> 0)     */
/* at once; requests run in the order they were started, and a blocking call */
/* made meanwhile runs behind them, so every rank communicates in program    */
/* order. Buffers must stay alive, and `in` unmodified, until the wait.      */
/* On the cuda backend the start enqueues the call on its communicator's     */
/* stream instead (no thread), and the wait makes the device work after it   */
/* wait for the call: inside a step it returns without blocking the host.    */
/*===----------------------------------------------------------------------===*/

int64_t cleave_rt_all_reduce_start(int64_t group, int32_t dtype, int32_t op,
                                   const void *in, void *out, int64_t count);
int64_t cleave_rt_all_gather_start(int64_t group, int32_t dtype, const void *in,
                                   void *out, int64_t count);
int64_t cleave_rt_reduce_scatter_start(int64_t group, int32_t dtype, int32_t op,
                                       const void *in, void *out,
                                       int64_t count);
int64_t cleave_rt_all_to_all_start(int64_t group, int32_t dtype, const void *in,
                                   void *out, int64_t count);
/** `pairs` is copied at the start (it need not outlive the call). */
int64_t cleave_rt_collective_permute_start(int64_t group, int32_t dtype,
                                           const void *in, void *out,
                                           int64_t count, int64_t npairs,
                                           const int64_t *pairs);
int64_t cleave_rt_send_start(int64_t group, int64_t peer, int32_t dtype,
                             const void *in, int64_t count);
int64_t cleave_rt_recv_start(int64_t group, int64_t peer, int32_t dtype,
                             void *out, int64_t count);
/** Blocks until `request` has run and forgets it. `in` and `out`, unless
 *  NULL, must be the buffers it was started with (checked; generated code
 *  passes them so that the compiler sees the buffers in use until here).
 *  `operand` is not read: generated code passes the operand's buffer as the
 *  program sees it at the wait, so that bufferization does not overwrite
 *  the operand in place before (it may be NULL). Returns 0, or non-zero
 *  when the runtime has failed: the error, raised on the progress thread or
 *  here, is cleave_rt_error_message() and names the rank and the call
 *  ("rank 1: all_reduce on group 0 ... timed out ..."). The request has
 *  run to its end when the wait returns, whatever the result (on the cuda
 *  backend inside a step: in the order of the device's compute stream). */
int cleave_rt_wait(int64_t request, const void *in, const void *out,
                   const void *operand);

/** Writes this rank's flight recorder (its last communication calls) as
 *  JSON to `path`, or as text to stderr when `path` is NULL. The runtime
 *  dumps it by itself on a communication error (stderr, and
 *  CLEAVE_FLIGHT_RECORDER_DIR/cleave-flight-rank<R>.json if set). */
int cleave_rt_flight_recorder_dump(const char *path);

/*===----------------------------------------------------------------------===*/
/* Dense math called by generated code                                       */
/*===----------------------------------------------------------------------===*/

/** Row-major batched GEMM:
 *    C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b],  b in [0, batch)
 *  with op(X) = X or X^T; op(A) is m x k, op(B) is k x n, C is m x n.
 *  A[b] starts at a + b * stride_a elements (likewise B, C); stride 0 shares
 *  one matrix across the batch. Accumulates in f32 at least (f64 for F64);
 *  BF16 and F16 operands are converted. */
void cleave_rt_gemm(int32_t dtype, int32_t trans_a, int32_t trans_b,
                    int64_t batch, int64_t m, int64_t n, int64_t k,
                    double alpha, const void *a, int64_t lda, int64_t stride_a,
                    const void *b, int64_t ldb, int64_t stride_b, double beta,
                    void *c, int64_t ldc, int64_t stride_c);

/*===----------------------------------------------------------------------===*/
/* Counter-based random numbers (Philox-4x32-10)                              */
/*===----------------------------------------------------------------------===*/

/** The 4 x 32-bit output block of Philox-4x32-10 for key (seed) and
 *  counter (c0, c1, c2, c3). Documented so generated code can match it. */
void cleave_rt_philox(uint64_t seed, uint32_t c0, uint32_t c1, uint32_t c2,
                      uint32_t c3, uint32_t out[4]);
/** A stable 64-bit stream id for a name (FNV-1a). */
uint64_t cleave_rt_hash_name(const char *name);

typedef enum {
  CLEAVE_INIT_ZEROS = 0,
  CLEAVE_INIT_ONES = 1,
  CLEAVE_INIT_NORMAL = 2,  /* mean 0, standard deviation `scale` */
  CLEAVE_INIT_UNIFORM = 3, /* in [-scale, scale) */
} cleave_init_t;

/** Element i of `out` (i in [0, count)) gets the value for global index
 *  `offset + i` of stream (seed, stream): the same whatever the split. */
int cleave_rt_fill(int32_t dtype, void *out, int64_t count, int32_t kind,
                   double scale, uint64_t seed, uint64_t stream,
                   int64_t offset);

/*===----------------------------------------------------------------------===*/
/* Memory and time                                                            */
/*===----------------------------------------------------------------------===*/

/** 64-byte aligned host memory (device memory on the cuda backend). */
void *cleave_rt_alloc(int64_t bytes);
void cleave_rt_free(void *ptr);
/** Bytes requested through cleave_rt_alloc and not yet freed (`live`), and
 *  the most live at once since the process started or since the last
 *  cleave_rt_reset_peak_memory (`peak`). Compiled CPU programs allocate their
 *  buffers here too, so this is the program's own memory: parameters,
 *  gradients, optimizer state, activations and temporaries, without the
 *  allocator's slack or the runtime's communication buffers. Either pointer
 *  may be null. */
void cleave_rt_memory_stats(int64_t *live, int64_t *peak);
/** Starts a new peak at the bytes live now. */
void cleave_rt_reset_peak_memory(void);
/** Seconds on a monotonic clock. */
double cleave_rt_now(void);

/*===----------------------------------------------------------------------===*/
/* Bulk copies between buffers and host memory (checkpoint snapshots and     */
/* restores). The cpu backend's buffers are host memory: a copy is a memcpy. */
/* The cuda backend's are managed memory on the device: host code may touch  */
/* them in place (page by page, through faults), but moves their contents in */
/* bulk with these calls: DMA on a stream of their own.                      */
/*===----------------------------------------------------------------------===*/

/** One block of cleave_rt_copy_to_host / cleave_rt_copy_from_host. */
typedef struct {
  void *dst;
  const void *src;
  int64_t bytes;
} cleave_rt_copy_t;

/** Non-zero when the buffers of cleave_rt_alloc live on a device (the cuda
 *  backend); 0 on the cpu backend and before cleave_rt_init. */
int32_t cleave_rt_buffers_on_device(void);
/** Page-locks `bytes` of host memory at `ptr` (page aligned) that copies go
 *  to or come from, so that they run as DMA, asynchronously, at the bus's
 *  bandwidth (cuda backend; nothing on the cpu backend). Returns 0, or
 *  non-zero with the error recorded. cleave_rt_host_unpin undoes it. */
int cleave_rt_host_pin(void *ptr, int64_t bytes);
/** Undoes cleave_rt_host_pin before the memory is freed. Never fails:
 *  memory the backend does not know (not pinned, or pinned by a runtime
 *  finalized since) is left as it is. */
void cleave_rt_host_unpin(void *ptr);
/** Copies `count` blocks from buffers of cleave_rt_alloc (`src`, any address
 *  inside one) to host memory (`dst`); all are done when it returns. The
 *  cpu backend memcpys each; the cuda backend enqueues them on its copy
 *  stream after the device work enqueued so far and waits once. Returns 0,
 *  or non-zero with the error recorded. */
int cleave_rt_copy_to_host(const cleave_rt_copy_t *copies, int64_t count);
/** The reverse: host memory (`src`) into buffers of cleave_rt_alloc
 *  (`dst`); done when it returns (device work enqueued later sees it). */
int cleave_rt_copy_from_host(const cleave_rt_copy_t *copies, int64_t count);

/*===----------------------------------------------------------------------===*/
/* Tensor files: parameters and checkpoints                                   */
/*                                                                            */
/* The safetensors layout: an 8-byte little-endian header length, a JSON      */
/* header {"__metadata__": {...strings...}, "name": {"dtype": "F32",          */
/* "shape": [..], "data_offsets": [begin, end]}, ...}, then the data.         */
/* Cleave adds metadata "format" = "cleave", and "crc32:<name>" (zlib) or     */
/* "crc32c:<name>" (given by the caller) per tensor, checked on read. Writes  */
/* go to a temporary file renamed into place, so a crash never leaves a       */
/* half-written file under the final name.                                    */
/*===----------------------------------------------------------------------===*/

/** CRC32C (Castagnoli; SSE4.2 where the CPU has it) of `bytes` bytes at
 *  `data`, continuing `crc` (0 to start). */
uint32_t cleave_rt_crc32c(uint32_t crc, const void *data, int64_t bytes);
/** Copies `bytes` bytes from `src` to `dst` and returns their CRC32C,
 *  continuing `crc`, computed in the same pass. */
uint32_t cleave_rt_copy_crc32c(void *dst, const void *src, int64_t bytes,
                               uint32_t crc);
/** The CRC32C of A then B from the CRC32C of A, that of B and B's length. */
uint32_t cleave_rt_crc32c_combine(uint32_t crc_a, uint32_t crc_b,
                                  int64_t bytes_b);

typedef struct cleave_tensor_file cleave_tensor_file;
typedef struct cleave_tensor_writer cleave_tensor_writer;

/** Opens and validates the header; NULL on error (message recorded). */
cleave_tensor_file *cleave_tensor_file_open(const char *path);
void cleave_tensor_file_close(cleave_tensor_file *file);
int64_t cleave_tensor_file_count(const cleave_tensor_file *file);
const char *cleave_tensor_file_name(const cleave_tensor_file *file,
                                    int64_t index);
/** Shape and dtype of tensor `name`; returns 0, or non-zero if absent.
 *  `shape` receives up to 8 dimensions. */
int cleave_tensor_file_info(const cleave_tensor_file *file, const char *name,
                            int32_t *dtype, int64_t *rank, int64_t shape[8]);
/** Copies tensor `name` into `dst` (`bytes` must match) and checks its
 *  checksum: plain reads of 8 MiB or less straight into `dst`, the kernel
 *  told to read ahead (1 MiB or more), each piece checksummed after its
 *  read. Returns 0 on success. */
int cleave_tensor_file_read(cleave_tensor_file *file, const char *name,
                            void *dst, int64_t bytes);
/** Called with the bytes [offset, offset + bytes) of a tensor's data,
 *  valid during the call only. */
typedef void (*cleave_tensor_piece_fn)(void *context, int64_t offset,
                                       const void *data, int64_t bytes);
/** Streams tensor `name`'s data to `fn` in pieces, in order (8 MiB or
 *  less, read like cleave_tensor_file_read into one buffer of the file's),
 *  then checks its checksum. For a caller that needs part of a
 *  tensor (a restore onto another mesh): it copies what it needs of each
 *  piece and holds no buffer of the whole tensor. Returns 0, or non-zero
 *  with the error recorded: on a checksum mismatch after `fn` has seen
 *  every piece, so what it copied must then be dropped. */
int cleave_tensor_file_read_pieces(cleave_tensor_file *file, const char *name,
                                   cleave_tensor_piece_fn fn, void *context);
/** Metadata value, or NULL. */
const char *cleave_tensor_file_metadata(const cleave_tensor_file *file,
                                        const char *key);

cleave_tensor_writer *cleave_tensor_writer_create(const char *path);
/** Records a tensor; `data` must stay valid until finish. */
int cleave_tensor_writer_add(cleave_tensor_writer *writer, const char *name,
                             int32_t dtype, int64_t rank, const int64_t *shape,
                             const void *data);
/** Records a tensor whose CRC32C the caller computed (e.g. while copying
 *  it, cleave_rt_copy_crc32c): stored as "crc32c:<name>", not computed
 *  again. */
int cleave_tensor_writer_add_crc32c(cleave_tensor_writer *writer,
                                    const char *name, int32_t dtype,
                                    int64_t rank, const int64_t *shape,
                                    const void *data, uint32_t crc32c);
int cleave_tensor_writer_set_metadata(cleave_tensor_writer *writer,
                                      const char *key, const char *value);
/** Writes atomically and frees the writer. Returns 0 on success. */
int cleave_tensor_writer_finish(cleave_tensor_writer *writer);
/** The same, and `*file_crc32c` receives the CRC32C of the whole file
 *  (header and data; combined from the tensors' CRCs, so with
 *  cleave_tensor_writer_add_crc32c no data is read again). Test hook:
 *  CLEAVE_FAULT_STALL_WRITE=SUFFIX stalls the writer of a path ending in
 *  SUFFIX, after the header and half of the tensors, until it is killed. */
int cleave_tensor_writer_finish_crc32c(cleave_tensor_writer *writer,
                                       uint32_t *file_crc32c);
/** Removes the temporary files that writers of `path` on this host left
 *  when they died mid-write (`<path>.tmp.<host>.<pid>.<n>`, and the older
 *  `<path>.tmp.<pid>.<n>`, whose process no longer runs). Writers do it
 *  before writing, and cleave-run for its outputs at start. Returns the
 *  number removed, or -1 with the error recorded. */
int cleave_tensor_file_remove_stale(const char *path);
void cleave_tensor_writer_abort(cleave_tensor_writer *writer);

/*===----------------------------------------------------------------------===*/
/* Token data (nanoGPT-style .bin files: a raw array of uint16 or uint32)     */
/*===----------------------------------------------------------------------===*/

typedef struct cleave_token_file cleave_token_file;

/** Maps `path`; `token_bytes` is 2 or 4. NULL on error (empty file, size not
 *  a multiple of the token size, ...). */
cleave_token_file *cleave_token_file_open(const char *path,
                                          int32_t token_bytes);
/** Wraps tokens already in memory (copied). */
cleave_token_file *cleave_token_file_from_memory(const void *tokens,
                                                 int64_t count,
                                                 int32_t token_bytes);
void cleave_token_file_close(cleave_token_file *file);
int64_t cleave_token_file_length(const cleave_token_file *file);
/** Rows [first_row, first_row + rows) of the global batch of step `step`:
 *  row r starts at a position drawn from (seed, step, r), so every rank sees
 *  the same global batch whatever the split. inputs/targets are rows x
 *  seq_len int32 (targets shifted by one). Fails, naming the file and the
 *  position, if a token is >= vocab or the file is shorter than seq_len + 1.
 *  Returns 0 on success. */
int cleave_token_file_batch(cleave_token_file *file, uint64_t seed,
                            int64_t step, int64_t first_row, int64_t rows,
                            int64_t seq_len, int64_t vocab, int32_t *inputs,
                            int32_t *targets);

/*===----------------------------------------------------------------------===*/
/* Local launcher                                                             */
/*===----------------------------------------------------------------------===*/

/** Runs `argv` as `nprocs` local ranks (RANK, WORLD_SIZE, LOCAL_RANK,
 *  MASTER_ADDR, MASTER_PORT and CLEAVE_RENDEZVOUS set for each), forwards
 *  their output prefixed with the rank when `prefix_output`, and waits. If a
 *  rank fails or dies, prints which one and how, and ends the others within
 *  `timeout_ms` (never hangs). Returns 0 if every rank exited 0. */
int cleave_launch_local(int32_t nprocs, char *const argv[],
                        int32_t prefix_output, int64_t timeout_ms);

/** cleave_launch_local with more control. */
typedef struct {
  int32_t nprocs;
  char *const *argv; /**< NULL-terminated; argv[0] is looked up in PATH. */
  int32_t prefix_output;
  /** After the first failure, how long the other ranks get to end on their
   *  own before SIGTERM (SIGKILL one second later); <= 0 means
   *  CLEAVE_TIMEOUT_MS (else 300000) plus 10 s. */
  int64_t timeout_ms;
  /** "file" (a fresh directory under TMPDIR, removed afterwards; the
   *  default when NULL) or "tcp" (rank 0 serves tcp://127.0.0.1:port). */
  const char *rendezvous;
  /** If not NULL, nprocs entries receive each rank's exit status, or
   *  -signal for a rank killed by a signal. */
  int32_t *exit_status;
  /** If not NULL, every rank is a fork of this process (argv is unused)
   *  that sets the rank's environment variables, calls body(body_arg) and
   *  exits with its result: what the parent prepared (a compiled program)
   *  is shared, not rebuilt per rank. The parent must not have initialized
   *  the runtime. */
  int (*body)(void *body_arg);
  void *body_arg;
} cleave_launch_options_t;

/** Returns 0 if every rank exited 0; else the first failing rank's exit
 *  status (128 + signal for a signal). */
int cleave_launch(const cleave_launch_options_t *opts);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CLEAVE_RUNTIME_RUNTIME_H */

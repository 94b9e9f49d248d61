/* A host program around an AOT-compiled CUDA training step: it references
 * the step's entry point and manifest (so the link must resolve the whole
 * program against the runtime) and starts the cuda backend. Training from C
 * would need the manifest parsed; cleave-run --aot does that. */
#include "cleave/Runtime/Runtime.h"

#include <stdio.h>
#include <string.h>

void cleave_entry_train_step(void **buffers);
const char *cleave_manifest_json(void);

int main(void) {
  void (*volatile entry)(void **) = cleave_entry_train_step;
  printf("train_step at %p, manifest of %zu bytes\n", (void *)entry,
         strlen(cleave_manifest_json()));
  cleave_rt_options_t options;
  cleave_rt_default_options(&options);
  options.backend = "cuda";
  if (cleave_rt_init(&options) != 0) {
    printf("cuda backend: %s\n", cleave_rt_error_message());
    return 0;
  }
  printf("cuda backend: ready\n");
  cleave_rt_finalize();
  return 0;
}

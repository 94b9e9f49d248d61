//===- Corpus.h - The embedded default training text ------------*- C++ -*-===//

#ifndef CLEAVE_TOOLS_CLEAVE_RUN_CORPUS_H
#define CLEAVE_TOOLS_CLEAVE_RUN_CORPUS_H

/// Where the text came from (a path on the build machine).
const char *cleaveCorpusName();
/// The text itself.
const char *cleaveCorpusText();

#endif // CLEAVE_TOOLS_CLEAVE_RUN_CORPUS_H

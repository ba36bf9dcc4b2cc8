// RUN: printf '' > %t.mt
// RUN: not mtc compile %t.mt --emit=ast 2>&1 | FileCheck %s
// A file without a model (here: an empty one).
// CHECK: {{.*}}.mt:1:1: error: unexpected end of file; expected 'model'
// CHECK: 1 error generated.

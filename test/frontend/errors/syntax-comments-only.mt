// RUN: not mtc compile %s --emit=ast 2>&1 | FileCheck %s
// Only comments: the error is at the start, there being no token to follow.
// CHECK: {{.*}}syntax-comments-only.mt:1:1: error: unexpected end of file; expected 'model'
# a hash comment
/* a block comment */

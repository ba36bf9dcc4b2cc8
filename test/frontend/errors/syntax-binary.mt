// RUN: python3 -c "import sys; sys.stdout.buffer.write(b'model M {\n\x7fELF\x02\x00\x00garbage')" > %t.mt
// RUN: not mtc compile %t.mt --emit=ast 2>&1 | FileCheck %s
// RUN: python3 -c "import sys; sys.stdout.buffer.write(b'model M {\n  config { a = \"\xff\xfe\" }\n}\n')" > %t2.mt
// RUN: not mtc compile %t2.mt --emit=ast 2>&1 | FileCheck %s --check-prefix=UTF8
// CHECK: {{.*}}.mt:2:6: error: file contains a NUL byte; is it a binary file?
// CHECK: 1 error generated.
// UTF8: {{.*}}.mt:2:17: error: invalid UTF-8 (byte 0xFF); source files must be UTF-8 text
// UTF8: 1 error generated.

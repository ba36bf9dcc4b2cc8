// Each comparison below is one check-string-dispatch.py reports (a .cu file:
// not reformatted); the commented one is not: if (device == "cpu")
bool gpu(const std::string &device) { return device != "cpu"; }
bool bf16(const std::string &p) { return "bf16" == p; }
bool full(const std::string &r) { return strcmp(r.c_str(), "full") == 0; }
bool mm(const Op &op) { return op.name == "matmul"; }
bool mean(const std::string &k) { return k == "sum"; } /* an attribute */

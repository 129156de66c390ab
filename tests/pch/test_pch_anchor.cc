// The target that compiles the tests' precompiled header (tests/CMakeLists.txt,
// zdp_test_pch): every test executable reuses it. An executable, so that it is compiled
// as position-independent executable code with the tests' flags: GCC refuses a header
// precompiled with other options (-fPIC against -fPIE) and crashed on another -O level.
int main() { return 0; }

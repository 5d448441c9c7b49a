// Leaks on purpose: under -fsanitize=address LeakSanitizer must report it at exit
// (the test passes on that report), proving leak checking covers the other tests.
#include <cstdio>
#include <cstring>

int main() {
    static char* volatile lost;
    lost = new char[4096];
    std::memset(lost, 1, 4096);
    lost = nullptr;  // the only pointer gone: a definite leak
    std::puts("leaked 4096 bytes");
    return 0;
}

// esp-test-client: TEST/BENCH ENTRY ONLY. The client end of an ESP tunnel
// driven by an SA file (written by gp_getconfig.py from a real getconfig reply)
// instead of a GP login, until the GP session drives the datapath itself.
// Same code path as the session will use: TunDevice + UdpSocket + EspDatapath.
//
// It also counts C++ heap allocations over its whole life and prints
// "allocations=N" at exit, so the tests can check the packet path allocates
// nothing per packet (N stays far below the packet count).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "tools/esp-gateway/esp_endpoint.h"

namespace {
std::atomic<unsigned long long> g_allocations{0};
}

void* operator new(std::size_t size) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(size ? size : 1)) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

int main(int argc, char** argv) {
    const int rc = espvpn::tools::run_esp_endpoint(espvpn::tools::EndpointRole::client, argc, argv);
    std::printf("allocations=%llu\n", g_allocations.load());
    return rc;
}

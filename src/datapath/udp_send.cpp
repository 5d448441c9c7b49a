#include "src/datapath/udp_send.h"

#include <poll.h>

namespace espvpn::datapath {

void wait_for_send_room(const io::UdpSocket& udp, ControlChannel& control, io::SendStatus why) {
    constexpr int kSocketFullWaitMs = 20;  // POLLOUT wait when the send buffer is full
    constexpr int kNoBuffersWaitMs = 1;    // ENOBUFS gives no POLLOUT edge: just pause
    pollfd fds[2] = {{udp.fd(), POLLOUT, 0}, {control.fd(), POLLIN, 0}};
    if (why == io::SendStatus::no_buffers) {
        (void)::poll(&fds[1], 1, kNoBuffersWaitMs);
    } else {
        (void)::poll(fds, 2, kSocketFullWaitMs);
    }
}

}  // namespace espvpn::datapath

// Internal to crypto/aes_gcm.cpp: the AVX-512 + VAES + VPCLMULQDQ functions behind AesGcm.
// Call only where AesGcm::cpu_has(AesGcm::Path::avx512), with a key from gcm_clmul::set_key.
#pragma once

#include <cstddef>
#include <cstdint>

#include "crypto/aes_gcm.h"

namespace espvpn::gcm_avx512 {

void seal(const AesGcm::Key& key, const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aad_len,
          const std::uint8_t* in, std::uint8_t* out, std::size_t len, std::uint8_t* tag);
bool open(const AesGcm::Key& key, const std::uint8_t* nonce, const std::uint8_t* aad, std::size_t aad_len,
          const std::uint8_t* in, std::uint8_t* out, std::size_t len, const std::uint8_t* tag, std::size_t tag_len);

}  // namespace espvpn::gcm_avx512

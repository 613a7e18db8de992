// The loop of base/copy_checksum.cpp's one-pass kernels, included once per
// instruction set inside that set's target pragma, after the set's
// `Lanes` (XXH3's 8 accumulators in registers), load_lanes, store_lanes and
// copy_stripe (load a 64-byte stripe once, store it, accumulate it).
//
// XXH3_hashLong_64b_internal with the default secret (XXH3_64bits for
// bytes > XXH3_MIDSIZE_MAX), copying each stripe as it is hashed.
std::uint64_t copy_checksum_long(xxh_u8* destination, const xxh_u8* source, std::size_t bytes) {
  const xxh_u8* const secret = XXH3_kSecret;
  constexpr std::size_t kSecretBytes = sizeof(XXH3_kSecret);
  constexpr std::size_t kStripesPerBlock = (kSecretBytes - XXH_STRIPE_LEN) / XXH_SECRET_CONSUME_RATE;
  constexpr std::size_t kBlockBytes = XXH_STRIPE_LEN * kStripesPerBlock;
  XXH_ALIGN(64) xxh_u64 lanes[XXH_ACC_NB] = XXH3_INIT_ACC;
  Lanes acc = load_lanes(lanes);
  const auto stripes = [&](std::size_t from, std::size_t count) {
    for (std::size_t s = 0; s < count; ++s) {
      const std::size_t at = from + s * XXH_STRIPE_LEN;
      copy_stripe(acc, destination + at, source + at, secret + s * XXH_SECRET_CONSUME_RATE);
    }
  };
  const std::size_t blocks = (bytes - 1) / kBlockBytes;
  for (std::size_t block = 0; block < blocks; ++block) {
    stripes(block * kBlockBytes, kStripesPerBlock);
    store_lanes(lanes, acc);
    scramble(lanes, secret + kSecretBytes - XXH_STRIPE_LEN);
    acc = load_lanes(lanes);
  }
  stripes(blocks * kBlockBytes, ((bytes - 1) - blocks * kBlockBytes) / XXH_STRIPE_LEN);
  const std::size_t last = bytes - XXH_STRIPE_LEN;  // overlaps the stripes before: stored twice, the same bytes
  const xxh_u8* const last_secret = secret + kSecretBytes - XXH_STRIPE_LEN - XXH_SECRET_LASTACC_START;
  copy_stripe(acc, destination + last, source + last, last_secret);
  store_lanes(lanes, acc);
  return XXH3_mergeAccs(lanes, secret + XXH_SECRET_MERGEACCS_START, static_cast<xxh_u64>(bytes) * XXH_PRIME64_1);
}

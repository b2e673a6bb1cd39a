//! The KV cache a request should hold, so the view can set measured memory growth beside it.

/// Expected KV-cache bytes: 2 (K and V) × layers × kv heads × head dim × dtype bytes × tokens ×
/// batch. Saturates instead of overflowing on absurd inputs.
pub fn expected_kv_bytes(
    layers: usize,
    kv_heads: usize,
    head_dim: usize,
    dtype_bytes: usize,
    tokens: usize,
    batch: usize,
) -> u64 {
    [layers, kv_heads, head_dim, dtype_bytes, tokens, batch]
        .into_iter()
        .fold(2u64, |acc, n| acc.saturating_mul(n as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama3_8b_bf16_by_hand() {
        // Llama 3 8B: 32 layers, 8 KV heads (GQA), head dim 128, bf16 = 2 bytes.
        // Per token: 2 × 32 × 8 × 128 × 2 = 131 072 bytes = 128 KiB.
        // 1000 tokens × batch 4: 131 072 × 4000 = 524 288 000 bytes = 500 MiB.
        assert_eq!(expected_kv_bytes(32, 8, 128, 2, 1, 1), 131_072);
        assert_eq!(expected_kv_bytes(32, 8, 128, 2, 1000, 4), 524_288_000);
    }

    #[test]
    fn zero_tokens_is_zero_and_huge_saturates() {
        assert_eq!(expected_kv_bytes(32, 8, 128, 2, 0, 4), 0);
        assert_eq!(
            expected_kv_bytes(usize::MAX, usize::MAX, 2, 2, 2, 2),
            u64::MAX
        );
    }
}

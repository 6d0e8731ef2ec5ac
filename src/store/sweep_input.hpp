// A sweep file read with its command-line overrides and what it reads before any work: its input
// file (input = "file": a matrix in an HDF5 file, checked against the sweep's T and d), and for
// encoder and Mamba-2 blocks the model folder and the token file (input = "tokens"), checked against
// every grid point (docs/CONFIG.md "Encoder blocks", "Mamba-2 blocks").
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "config/sweep_spec.hpp"

namespace rcsweep::store {

/// input = "file": read model.input_path (relative to the folder of `sweep_file`), dataset
/// model.input_dataset, into the spec (SweepSpec::set_input_file), after checking its shape
/// against T x d at every grid point whose input is "file". Nothing when no grid point's input is
/// "file". Throws ConfigError on key model.input_path (exit 2, before any work) when the file
/// cannot be read (store::read_matrix's message) or its shape does not fit, naming how many grid
/// points it misses and the first.
void load_input_file(config::SweepSpec& spec, const std::filesystem::path& sweep_file);

/// block = "encoder" at some grid point: opens model.model_folder (relative to the folder of
/// `sweep_file`) through models::encoder::open_model, with its weights when some point has
/// init = "checkpoint" (every tensor checked, the folder mapped once per process); input =
/// "tokens" at some point: reads the token file model.input_path (checkpoint::read_token_file).
/// Then checks every encoder point against the model: d = hidden_size, heads =
/// num_attention_heads, with init = "checkpoint" the largest depth <= num_hidden_layers; and every
/// point reading tokens against the token file: T + the first position id (RoBERTa: pad_token_id
/// + 1) <= max_position_embeddings, replicates (the most a point may run) <= the file's excerpts
/// (replicate r reads excerpt r), each excerpt read at least T tokens long, and every id read
/// (the first T tokens of each) below vocab_size. Each failed check is one issue of a ConfigError
/// (exit 2, before any work) naming the key (model.model_folder, model.input_path, model.d or
/// axes.d, model.heads, model.depth, model.T, sweep.replicates, ...), the values, and for a grid
/// check how many points fail and the first; a token check lists the first few excerpts or ids at
/// fault and a count. The checkpoint module's ConfigErrors (a missing config.json or tensor, a
/// refused model_type, a bad header, a token file that is not one) pass through unchanged.
/// Finally SweepSpec::set_encoder_inputs with the folder made absolute, the excerpts and the
/// digest of config.json's bytes, the excerpts read and (init = "checkpoint") every weight file's
/// size, tensors (name, dtype, shape, offsets) and metadata, so a changed config, token file or
/// checkpoint header changes the plan hash.
/// block = "mamba2" at some grid point (never beside "encoder": parse_sweep refuses that): the same
/// for a mamba_ssm folder through models::mamba2::open_model (mamba2_shape's and the checkpoint's
/// ConfigErrors pass through), every mamba2 point checked against d = d_model and, with init =
/// "checkpoint", the largest depth <= n_layer; the token file as above against vocab_size (no
/// position limit: the block has no position embedding). docs/CONFIG.md "Mamba-2 blocks".
/// Nothing when no grid point has an encoder or a Mamba-2 block.
void load_encoder_inputs(config::SweepSpec& spec, const std::filesystem::path& sweep_file);

/// The sweep a store was made from, from its canonical text (/config; `source` names it in
/// messages): config::parse_sweep, with the content digests of its input file and its encoder
/// inputs (comment lines of the text) restored, so that the plan hash is the store's. Nothing is
/// read from disk: an encoder's model folder and token file are not attached (the plan then
/// prices an encoder without its config.json: models/encoder/encoder_kind.cpp). Throws the
/// ConfigError of parse_sweep.
config::SweepSpec stored_sweep(const std::string& config_text, const std::string& source);

/// config::load_sweep(sweep_file, overrides), then load_input_file and load_encoder_inputs.
config::SweepSpec load_sweep_with_input(const std::filesystem::path& sweep_file,
                                        const std::vector<std::string>& overrides);

}  // namespace rcsweep::store

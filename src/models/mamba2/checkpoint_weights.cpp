// Placeholder until the unit lands (see mamba2.hpp).
#include "models/mamba2/mamba2.hpp"

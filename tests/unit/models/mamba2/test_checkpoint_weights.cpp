// Placeholder until the unit lands.
#include "models/mamba2/mamba2.hpp"

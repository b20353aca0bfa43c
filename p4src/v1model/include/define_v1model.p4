// v1model specifics: BMv2 ports are bit<9>; P4Runtime sees them as port_num_t (bit<16>).

#ifndef SUPERGW_DEFINE_V1MODEL_P4
#define SUPERGW_DEFINE_V1MODEL_P4

typedef bit<9> v1model_port_t;

const v1model_port_t V1MODEL_CPU_PORT = (v1model_port_t)CPU_PORT;

#endif  // SUPERGW_DEFINE_V1MODEL_P4
